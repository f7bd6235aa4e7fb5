//! Tests of the configuration: the table, flags, files, rename-command.

use super::load::*;
use super::params::*;
use super::*;

#[test]
fn rename_command_renames_disables_and_chains_like_redis() {
    let mut c = Config::default();
    c.apply_text(b"rename-command FLUSHALL f1u5h\nrename-command CONFIG \"\"\nrename-command get g1\nrename-command G1 g2\nrename-command DEBUG \"\"\n")
        .unwrap();
    let r = &c.command_renames;
    assert_eq!(r.resolve(b"F1U5H"), CommandName::Renamed("flushall"));
    assert_eq!(r.resolve(b"flushall"), CommandName::Removed);
    assert_eq!(r.resolve(b"config"), CommandName::Removed);
    assert_eq!(r.resolve(b"g1"), CommandName::Removed);
    assert_eq!(r.resolve(b"g2"), CommandName::Renamed("get"));
    assert_eq!(r.resolve(b"set"), CommandName::Unchanged);
    assert!(r.reachable("flushall") && r.reachable("get") && r.reachable("set"));
    assert!(!r.reachable("config"));
    let error = |text: &str| Config::default().apply_text(text.as_bytes()).unwrap_err();
    assert_eq!(
        error("rename-command nosuch x").message,
        "No such command in rename-command"
    );
    assert_eq!(
        error("rename-command get set").message,
        "Target command name already exists"
    );
    assert_eq!(
        error("rename-command get x\nrename-command get y").message,
        "No such command in rename-command"
    );
    assert_eq!(
        error("rename-command get").message,
        "Bad directive or wrong number of arguments"
    );
    assert_eq!(
        error("rename-command config|get x").message,
        "No such command in rename-command"
    );
    // A renamed-away name can be taken by another command.
    let mut c = Config::default();
    c.apply_text(b"rename-command get tmp\nrename-command set get\n")
        .unwrap();
    assert_eq!(
        c.command_renames.resolve(b"get"),
        CommandName::Renamed("set")
    );
    assert_eq!(c.command_renames.resolve(b"set"), CommandName::Removed);
    assert!(c.command_renames.reachable("get") && c.command_renames.reachable("set"));
}

fn run(args: &[&str]) -> Result<Config, ConfigError> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    match Config::from_args_with_stdin(&args, &mut std::io::empty())? {
        Invocation::Run(c) => Ok(*c),
        other => panic!("expected a configuration, got {other:?}"),
    }
}

fn get(config: &Config, name: &str) -> String {
    String::from_utf8(
        lookup(name.as_bytes())
            .expect("known parameter")
            .get(config),
    )
    .expect("utf-8")
}

#[test]
fn defaults_come_from_the_table() {
    let c = Config::default();
    assert_eq!(c.port, 6379);
    assert_eq!(c.bind, vec!["127.0.0.1".to_string()]);
    assert_eq!(c.dir, PathBuf::from("./data"));
    assert!(c.appendonly);
    assert_eq!(c.appendfsync, AppendFsync::Everysec);
    assert_eq!(get(&c, "save"), "3600 1 300 100 60 10000");
    assert_eq!(c.limits.hash_max_listpack_entries, 512);
    assert_eq!(c.limits.zset_max_listpack_entries, 128);
    assert_eq!(c.limits.list_max_listpack_size, -2);
    assert_eq!(c.proto_max_bulk_len, 512 * 1024 * 1024);
    assert_eq!(c.hz, 10);
    assert_eq!(c.maxclients, 10000);
    assert_eq!(c.databases, 16);
    assert_eq!(c.requirepass, None);
    for p in PARAMS {
        let shown = p.get(&c);
        let expected: Vec<u8> = p.default.as_bytes().to_vec();
        assert_eq!(shown, expected, "default of {} shows as given", p.name);
    }
}

#[test]
fn names_are_unique() {
    let mut names: Vec<&str> = PARAMS.iter().flat_map(|p| p.names()).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len());
    for name in &names {
        assert!(!REDIS_ONLY_PARAMS.contains(name), "{name} is implemented");
    }
}

#[test]
fn flags_override_defaults() {
    let c = run(&[
        "--port",
        "7000",
        "--bind",
        "127.0.0.1",
        "::1",
        "--appendonly",
        "no",
        "--save",
        "",
    ])
    .unwrap();
    assert_eq!(c.port, 7000);
    assert_eq!(c.bind, vec!["127.0.0.1".to_string(), "::1".to_string()]);
    assert!(!c.appendonly);
    assert!(c.save.is_empty());
    c.check_supported().unwrap();
}

#[test]
fn multi_word_values_in_one_flag_are_split() {
    let c = run(&["--save", "900 1 300 10", "--bind", "127.0.0.1 ::1"]).unwrap();
    assert_eq!(get(&c, "save"), "900 1 300 10");
    assert_eq!(c.bind.len(), 2);
}

#[test]
fn empty_save_flag_before_another_flag_or_last() {
    let c = run(&["--save", "--port", "7001"]).unwrap();
    assert!(c.save.is_empty());
    assert_eq!(c.port, 7001);
    let c = run(&["--port", "7001", "--save"]).unwrap();
    assert!(c.save.is_empty());
}

#[test]
fn flag_errors_name_the_generated_line() {
    let e = run(&["--port", "abc"]).unwrap_err();
    assert_eq!(e.line, Some((2, "port \"abc\"".to_string())));
    assert_eq!(e.message, "argument couldn't be parsed into an integer");
    let e = run(&["--port", "0", "--bogus", "1"]).unwrap_err();
    assert_eq!(e.line, Some((3, "bogus \"1\"".to_string())));
    assert_eq!(e.message, "Bad directive or wrong number of arguments");
    let e = run(&["--port"]).unwrap_err();
    assert_eq!(e.message, "wrong number of arguments");
    let shown = e.to_string();
    assert!(shown.contains("*** FATAL CONFIG FILE ERROR"), "{shown}");
    assert!(
        shown.contains("Reading the configuration file, at line 2\n>>> 'port'\n"),
        "{shown}"
    );
}

#[test]
fn version_and_help() {
    let v =
        Config::from_args_with_stdin(&["--version".to_string()], &mut std::io::empty()).unwrap();
    assert_eq!(v, Invocation::Version);
    let h = Config::from_args_with_stdin(&["-h".to_string()], &mut std::io::empty()).unwrap();
    assert_eq!(h, Invocation::Help);
}

#[test]
fn config_file_syntax() {
    let dir = tempfile::tempdir().unwrap();
    let inc = dir.path().join("extra.conf");
    std::fs::write(&inc, "maxclients 50\n").unwrap();
    let main = dir.path().join("main.conf");
    std::fs::write(
        &main,
        format!(
            "# a comment\n\n  port 7002  \nrequirepass \"pa ss\\x41\"\nsave 900 1\nsave 60 100\nhash-max-ziplist-entries 7\n\
             list-max-ziplist-entries 5\ninclude {}\nlogfile ''\nloglevel WARNING\nappendonly no\n",
            inc.display()
        ),
    )
    .unwrap();
    let c = run(&[main.to_str().unwrap(), "--port", "7003"]).unwrap();
    assert_eq!(c.port, 7003, "flags come after the file");
    assert_eq!(c.requirepass.as_deref(), Some(&b"pa ssA"[..]));
    assert_eq!(
        get(&c, "save"),
        "900 1 60 100",
        "save lines add up in a file"
    );
    assert_eq!(c.limits.hash_max_listpack_entries, 7);
    assert_eq!(c.maxclients, 50);
    assert_eq!(c.loglevel, LogLevel::Warning);
    assert!(c.config_file.as_ref().is_some_and(|p| p.is_absolute()));
}

#[test]
fn config_file_errors() {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("bad.conf");
    std::fs::write(&main, "port 7000\nappendonly maybe\n").unwrap();
    let e = run(&[main.to_str().unwrap()]).unwrap_err();
    assert_eq!(e.line, Some((2, "appendonly maybe".to_string())));
    assert_eq!(e.message, "argument must be 'yes' or 'no'");
    std::fs::write(&main, "port \"7000\n").unwrap();
    assert_eq!(
        run(&[main.to_str().unwrap()]).unwrap_err().message,
        "Unbalanced quotes in configuration line"
    );
    std::fs::write(&main, "cluster-enabled yes\n").unwrap();
    assert!(run(&[main.to_str().unwrap()])
        .unwrap_err()
        .message
        .contains("hozon does not support"));
    std::fs::write(&main, "port 1 2\n").unwrap();
    assert_eq!(
        run(&[main.to_str().unwrap()]).unwrap_err().message,
        "wrong number of arguments"
    );
    let missing = dir.path().join("missing.conf");
    let e = run(&[missing.to_str().unwrap()]).unwrap_err();
    assert!(
        e.message
            .starts_with("Fatal error, can't open config file '"),
        "{}",
        e.message
    );
    assert!(
        e.message.ends_with("': No such file or directory"),
        "{}",
        e.message
    );
}

#[test]
fn missing_features_are_refused_and_the_defaults_are_not() {
    run(&[]).unwrap().check_supported().unwrap();
    run(&["--save", ""]).unwrap().check_supported().unwrap();
    let c = run(&["--appendonly", "no", "--save", "", "--maxmemory", "1mb"]).unwrap();
    c.check_supported().unwrap();
    assert_eq!(c.maxmemory, 1024 * 1024);
    let c = run(&["--appendonly", "no", "--save", "", "--daemonize", "yes"]).unwrap();
    c.check_supported().unwrap();
    assert_eq!(c.first_unsupported(), None);
}

#[test]
fn value_parsing_matches_redis() {
    let mut c = Config::default();
    let mut st = LoadState::default();
    let set = |c: &mut Config, st: &mut LoadState, name: &str, v: &str| {
        lookup(name.as_bytes()).unwrap().set(c, &[v.as_bytes()], st)
    };
    assert_eq!(
        set(&mut c, &mut st, "port", "65536").unwrap_err(),
        "argument must be between 0 and 65535 inclusive"
    );
    assert_eq!(
        set(&mut c, &mut st, "maxclients", "-1").unwrap_err(),
        "argument must be between 1 and 4294967295 inclusive"
    );
    assert_eq!(
        set(&mut c, &mut st, "maxclients", "0").unwrap_err(),
        "argument must be between 1 and 4294967295 inclusive"
    );
    set(&mut c, &mut st, "proto-max-bulk-len", "2mb").unwrap();
    assert_eq!(c.proto_max_bulk_len, 2 * 1024 * 1024);
    set(&mut c, &mut st, "proto-max-bulk-len", "2M").unwrap();
    assert_eq!(c.proto_max_bulk_len, 2_000_000);
    assert_eq!(
        set(&mut c, &mut st, "proto-max-bulk-len", "-5").unwrap_err(),
        "argument must be a memory value"
    );
    assert_eq!(
        set(&mut c, &mut st, "proto-max-bulk-len", "1x").unwrap_err(),
        "argument must be a memory value"
    );
    assert_eq!(
        set(&mut c, &mut st, "proto-max-bulk-len", "1k").unwrap_err(),
        "argument must be between 1048576 and 9223372036854775807 inclusive"
    );
    set(&mut c, &mut st, "hz", "0").unwrap();
    assert_eq!(c.hz, 1);
    set(&mut c, &mut st, "hz", "100000").unwrap();
    assert_eq!(c.hz, 500);
    assert_eq!(Config::default().busy_poll_us, 0);
    set(&mut c, &mut st, "busy-poll-us", "20").unwrap();
    assert_eq!(
        (c.busy_poll_us, get(&c, "busy-poll-us").as_str()),
        (20, "20")
    );
    assert_eq!(
        set(&mut c, &mut st, "busy-poll-us", "10001").unwrap_err(),
        "argument must be between 0 and 10000 inclusive"
    );
    assert_eq!(
        set(&mut c, &mut st, "appendfsync", "sometimes").unwrap_err(),
        "argument(s) must be one of the following: everysec, always, no"
    );
    set(&mut c, &mut st, "LogLevel", "Debug").unwrap();
    assert_eq!(get(&c, "loglevel"), "debug");
    assert_eq!(
        set(&mut c, &mut st, "dbfilename", "a/b").unwrap_err(),
        "dbfilename can't be a path, just a filename"
    );
    assert_eq!(
        set(&mut c, &mut st, "appendfilename", "").unwrap_err(),
        "appendfilename can't be empty"
    );
    assert_eq!(
        set(&mut c, &mut st, "save", "1").unwrap_err(),
        "Invalid save parameters"
    );
    assert_eq!(
        set(&mut c, &mut st, "timeout", "1.5").unwrap_err(),
        "argument couldn't be parsed into an integer"
    );
    set(&mut c, &mut st, "list-max-ziplist-size", "-5").unwrap();
    assert_eq!(get(&c, "list-max-listpack-size"), "-5");
    set(&mut c, &mut st, "maxmemory", "").unwrap();
    assert_eq!(c.maxmemory, 0);
}

#[test]
fn repr_quotes_like_redis() {
    let mut out = Vec::new();
    cat_repr(&mut out, b"a\"b\\c\n\x01");
    assert_eq!(out, b"\"a\\\"b\\\\c\\n\\x01\"".to_vec());
}

#[test]
fn strtoll_rules() {
    assert_eq!(strtoll_whole(b""), Some(0));
    assert_eq!(strtoll_whole(b" 12"), Some(12));
    assert_eq!(strtoll_whole(b"+3"), Some(3));
    assert_eq!(strtoll_whole(b"3 "), None);
    assert_eq!(strtoll_whole(b"-"), None);
    assert_eq!(strtoll_whole(b"99999999999999999999"), Some(i64::MAX));
}

#[test]
fn config_rewrite_keeps_foreign_lines_and_is_stable() {
    let old = b"# head\nrename-command FLUSHALL \"\"\nport 7000\nSAVE 60 1\nsave 30 2\ntimeout 5\n";
    let mut config = Config::default();
    config.port = 7000;
    config.timeout_s = 9;
    config.save = vec![crate::config::SavePoint {
        seconds: 60,
        changes: 1,
    }];
    let cwd = std::path::Path::new("/srv");
    let once = crate::config::rewrite_content(old, &config, Some(("10.0.0.1", 6380)), &[], cwd);
    let text = String::from_utf8(once.clone()).unwrap();
    assert!(
        text.starts_with(
            "# head\nrename-command FLUSHALL \"\"\nport 7000\nsave 60 1\n\ntimeout 9\n"
        ),
        "{text}"
    );
    assert!(text.contains("\n# Generated by CONFIG REWRITE\n"));
    assert!(text.contains("\nreplicaof 10.0.0.1 6380\n"));
    assert!(text.contains("\ndir \"/srv/data\"\n"), "{text}");
    // Rewrites of the result change nothing but, once, the empty last
    // line Redis's rewrite gives a file that ends with a newline.
    let twice = crate::config::rewrite_content(&once, &config, Some(("10.0.0.1", 6380)), &[], cwd);
    assert_eq!(
        String::from_utf8(twice.clone()).unwrap(),
        format!("{text}\n")
    );
    let thrice =
        crate::config::rewrite_content(&twice, &config, Some(("10.0.0.1", 6380)), &[], cwd);
    assert_eq!(thrice, twice);
    // A master drops the replicaof line.
    let master = crate::config::rewrite_content(&once, &config, None, &[], cwd);
    assert!(!String::from_utf8(master).unwrap().contains("replicaof"));
}
