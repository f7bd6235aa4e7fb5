//! DEBUG RELOAD and durability: the plain form gives back what the AOF
//! holds; NOSAVE and NOFLUSH change the dataset without logging the
//! change, so the server schedules a rewrite, after which a restart
//! (AOF replay) gives the reloaded dataset, not the one before it.

use crate::functions::{info_field, wait_rewrite_done};
use crate::harness::{show, start_hozon, Conn};

fn call(conn: &mut Conn, args: &[&str]) -> String {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    show(&conn.call(&args))
}

#[test]
fn a_restart_after_reload_nosave_gives_the_reloaded_dataset() {
    for snapshot in ["native", "rdb"] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_string_lossy().into_owned();
        let args = [
            "--dir",
            &d,
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--snapshot-format",
            snapshot,
            "--enable-debug-command",
            "yes",
        ];
        let server = start_hozon(&args);
        let mut conn = Conn::connect(server.port);
        assert_eq!(call(&mut conn, &["SET", "kept", "1"]), "+OK\\r\\n");
        assert_eq!(call(&mut conn, &["DEBUG", "RELOAD"]), "+OK\\r\\n");
        // The plain form changes nothing, so schedules nothing.
        assert_eq!(info_field(&mut conn, "aof_rewrite_scheduled"), "0");
        assert_eq!(call(&mut conn, &["SET", "dropped", "1"]), "+OK\\r\\n");
        assert_eq!(call(&mut conn, &["DEBUG", "RELOAD", "NOSAVE"]), "+OK\\r\\n");
        assert_eq!(call(&mut conn, &["EXISTS", "dropped"]), ":0\\r\\n");
        let digest = call(&mut conn, &["DEBUG", "DIGEST"]);
        wait_rewrite_done(&mut conn);
        drop(server); // SIGKILL: the AOF is replayed

        let server = start_hozon(&args);
        let mut conn = Conn::connect(server.port);
        assert_eq!(
            call(&mut conn, &["EXISTS", "dropped"]),
            ":0\\r\\n",
            "{snapshot}: the AOF still holds the key DEBUG RELOAD NOSAVE removed"
        );
        assert_eq!(call(&mut conn, &["GET", "kept"]), "$1\\r\\n1\\r\\n");
        assert_eq!(call(&mut conn, &["DEBUG", "DIGEST"]), digest, "{snapshot}");
    }
}
