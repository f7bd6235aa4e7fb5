//! Where the engine's ACL users come from and go to (docs/security.md,
//! "Where users are kept"): the configuration's `user` lines and the ACL
//! file at startup, ACL LOAD and ACL SAVE.

use std::path::PathBuf;
use std::sync::Arc;

use super::Core;
use crate::acl;
use crate::persist::io::{commit, CommitError, DurableFile};

/// Redis's refusal of a configuration with both kinds of users.
const BOTH: &str = "Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.";

impl Core {
    /// `acl-pubsub-default` into the users' state (at open and when
    /// CONFIG SET changes it).
    pub(crate) fn sync_acl_settings(&mut self) {
        self.acl.pubsub_all = self.config.acl.pubsub_all;
    }

    /// The ACL file's path, if `aclfile` is set: a relative path is inside
    /// `dir`, where Redis (which changes into `dir`) finds it.
    pub(crate) fn aclfile_path(&self) -> Option<PathBuf> {
        let name = &self.config.acl.aclfile;
        if name.is_empty() {
            return None;
        }
        let path = PathBuf::from(name);
        if path.is_relative() && !self.config.dir.as_os_str().is_empty() {
            return Some(self.config.dir.join(path));
        }
        Some(path)
    }

    /// Redis's `ACLLoadUsersAtStartup`: the configuration's `user` lines,
    /// or the ACL file, which must then exist and be valid. The error is
    /// what the server prints before it exits.
    pub(crate) fn load_users_at_startup(&mut self) -> Result<(), String> {
        self.sync_acl_settings();
        let configured = self.config.acl.users.clone();
        if self.aclfile_path().is_some() && !configured.is_empty() {
            return Err(BOTH.into());
        }
        for (name, rules) in &configured {
            self.acl
                .define(name, rules)
                .map_err(|e| format!("{e}\nCritical error while loading ACLs. Exiting."))?;
        }
        if self.aclfile_path().is_some() {
            let users = self
                .read_acl_file()
                .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
            self.acl.replace_all(users);
        }
        Ok(())
    }

    /// The users the ACL file defines (all of them, or Redis's text of
    /// every error found).
    fn read_acl_file(&self) -> Result<Vec<acl::User>, String> {
        let path = self.aclfile_path().expect("aclfile is set");
        let shown = &self.config.acl.aclfile;
        let content = self.io.read_all(&path).map_err(|e| {
            format!(
                "Error loading ACLs, opening file '{shown}': {}",
                crate::config::os_error_text(&e)
            )
        })?;
        acl::file::parse(&content, shown, self.acl.pubsub_all)
    }

    /// ACL LOAD: every user replaced by the file's, or nothing changed and
    /// the errors returned. On success, the names of the users replaced
    /// (other than `default`), whose connections are to be closed.
    pub(crate) fn load_acl_file(&mut self) -> Result<Vec<Vec<u8>>, String> {
        let users = self.read_acl_file()?;
        Ok(self.acl.replace_all(users))
    }

    /// ACL SAVE: the users written to a temporary file beside the ACL
    /// file, fsynced, renamed over it, the directory fsynced. On an error
    /// the previous file is whole; the error says which step failed.
    pub(crate) fn save_acl_file(&self) -> Result<(), String> {
        let path = self.aclfile_path().expect("aclfile is set");
        let mut temp = path.clone().into_os_string();
        temp.push(format!(".tmp-{}", std::process::id()));
        let temp = PathBuf::from(temp);
        let content = acl::file::text(&self.acl);
        let mut file =
            DurableFile::create(Arc::clone(&self.io), &temp).map_err(|e| e.to_string())?;
        file.append(&content).map_err(|e| e.to_string())?;
        file.finish().map_err(|e| e.to_string())?;
        commit(self.io.as_ref(), &temp, &path).map_err(|e| match e {
            CommitError::Rename(e) => e.to_string(),
            CommitError::DirNotSynced { file, source } => format!(
                "fsyncing the directory of {} (renamed, may not survive a power loss): {source}",
                file.display()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use crate::config::Config;
    use crate::engine::Engine;
    use crate::persist::io::{Fault, FaultyIo, Io};
    use crate::reply::Reply;

    const FILE: &str = "/d/users.acl";
    const OLD: &[u8] = b"user default on nopass sanitize-payload ~* &* +@all\nuser old on #9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 ~* resetchannels -@all +get\n";

    fn engine(io: &FaultyIo) -> Engine {
        let mut config = Config {
            dir: Path::new("/d").to_path_buf(),
            ..Config::default()
        };
        config.save.clear();
        config.appendonly = false;
        config.acl.aclfile = "users.acl".into();
        Engine::open_with_io(config, Arc::new(io.clone())).expect("opens")
    }

    fn run(engine: &mut Engine, args: &[&str]) -> Reply {
        let mut session = engine.new_session();
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        engine.execute(&mut session, &argv)
    }

    fn fresh() -> FaultyIo {
        let io = FaultyIo::new();
        io.set_contents(Path::new(FILE), OLD.to_vec());
        io
    }

    /// ACL SAVE is the temp file → fsync → rename → directory fsync
    /// sequence: whichever step fails, the previous file stays whole, no
    /// temporary file is left, and the client gets Redis's error.
    #[test]
    fn a_failed_acl_save_keeps_the_previous_file() {
        let io = fresh();
        let mut e = engine(&io);
        assert_eq!(
            run(&mut e, &["ACL", "SETUSER", "new", "on", "+@all"]),
            Reply::ok()
        );
        let faults = [
            Fault::FailWrite {
                nth: 1,
                errno: 28,
                sticky: true,
            },
            Fault::ShortWrite { nth: 1, bytes: 3 },
            Fault::FailSync { nth: 1, errno: 5 },
            Fault::FailRename { nth: 1, errno: 5 },
        ];
        for fault in faults {
            let io = fresh();
            let mut e = engine(&io);
            assert_eq!(
                run(&mut e, &["ACL", "SETUSER", "new", "on", "+@all"]),
                Reply::ok()
            );
            io.inject(fault);
            let reply = run(&mut e, &["ACL", "SAVE"]);
            if matches!(fault, Fault::ShortWrite { .. }) {
                // A short write is retried: the save succeeds.
                assert_eq!(reply, Reply::ok(), "{fault:?}");
                continue;
            }
            assert_eq!(
                reply,
                Reply::err("ERR There was an error trying to save the ACLs. Please check the server logs for more information"),
                "{fault:?}"
            );
            assert_eq!(
                io.contents(Path::new(FILE)).as_deref(),
                Some(OLD),
                "{fault:?}"
            );
            assert_eq!(
                io.list_dir(Path::new("/d")).expect("list"),
                vec!["users.acl".to_string()],
                "{fault:?}: a temporary file was left"
            );
        }
        // Without a fault the file holds the users, and survives a power
        // loss that drops everything not fsynced.
        let io = fresh();
        let mut e = engine(&io);
        assert_eq!(
            run(&mut e, &["ACL", "SETUSER", "new", "on", "+@all"]),
            Reply::ok()
        );
        assert_eq!(run(&mut e, &["ACL", "SAVE"]), Reply::ok());
        io.power_loss(crate::persist::io::PowerLoss::DropUnsynced);
        io.power_on();
        let saved = io.contents(Path::new(FILE)).expect("the file");
        let text = String::from_utf8(saved).expect("utf-8");
        assert!(text.contains("user new on "), "{text}");
        assert!(text.contains("user old "), "{text}");
    }

    /// ACL LOAD of a file with an error changes nothing; a good file
    /// replaces every user.
    #[test]
    fn acl_load_is_all_or_nothing() {
        let io = fresh();
        let mut e = engine(&io);
        assert_eq!(run(&mut e, &["ACL", "SETUSER", "mine", "on"]), Reply::ok());
        let list = run(&mut e, &["ACL", "LIST"]);
        io.set_contents(Path::new(FILE), b"user a on\nuser b on +nosuch\n".to_vec());
        let reply = run(&mut e, &["ACL", "LOAD"]);
        assert!(
            matches!(&reply, Reply::Error(t) if t.contains("users.acl:2: Error in applying operation '+nosuch'")),
            "{reply:?}"
        );
        assert_eq!(run(&mut e, &["ACL", "LIST"]), list);
        io.set_contents(Path::new(FILE), b"user a on\n".to_vec());
        assert_eq!(run(&mut e, &["ACL", "LOAD"]), Reply::ok());
        assert_eq!(
            run(&mut e, &["ACL", "USERS"]),
            Reply::Array(vec![
                Reply::Bulk(b"a".to_vec()),
                Reply::Bulk(b"default".to_vec())
            ])
        );
    }
}
