use crate::command::ctx::{BusyAction, BusyScript, Host};
use crate::{Config, Engine, Reply};

struct CountingHost {
    polls: usize,
    kill_after: usize,
    action: BusyAction,
}

impl Host for CountingHost {
    fn while_busy(&mut self, _busy: &BusyScript, _core: &mut crate::core::Core) -> BusyAction {
        self.polls += 1;
        if self.polls >= self.kill_after {
            self.action
        } else {
            BusyAction::Continue
        }
    }
}

fn engine_with_threshold(ms: u64) -> Engine {
    let mut config = Config::in_memory();
    config.busy_reply_threshold_ms = ms;
    Engine::open(config).expect("in-memory engine opens")
}

#[test]
fn a_busy_script_polls_the_host_and_a_kill_stops_it() {
    let mut engine = engine_with_threshold(20);
    let mut session = engine.new_session();
    let mut host = CountingHost {
        polls: 0,
        kill_after: 3,
        action: BusyAction::Kill,
    };
    let reply = engine.execute_with_host(
        &mut session,
        &[b"EVAL", b"local i = 0 while true do i = i + 1 end", b"0"],
        &mut host,
    );
    assert!(host.polls >= 3, "polled {} times", host.polls);
    let Reply::Error(text) = reply else {
        panic!("expected an error, got {reply:?}")
    };
    assert!(
        text.starts_with("ERR Script killed by user with SCRIPT KILL... script: "),
        "{text}"
    );
    // pcall cannot catch the kill.
    let mut host = CountingHost {
        polls: 0,
        kill_after: 2,
        action: BusyAction::Kill,
    };
    let reply = engine.execute_with_host(
        &mut session,
        &[
            b"EVAL",
            b"while true do pcall(function() while true do end end) end",
            b"0",
        ],
        &mut host,
    );
    assert!(matches!(reply, Reply::Error(_)), "{reply:?}");
    // The engine works normally afterwards.
    assert_eq!(
        engine.execute(&mut session, &[b"EVAL", b"return 1", b"0"]),
        Reply::Int(1)
    );
}

fn run(engine: &mut Engine, session: &mut crate::Session, argv: &[&str]) -> Reply {
    let args: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
    engine.execute(session, &args)
}

fn logged(engine: &mut Engine) -> Vec<Vec<String>> {
    engine
        .take_effects()
        .into_iter()
        .map(|e| {
            e.argv
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .collect()
}

#[test]
fn a_script_logs_the_commands_it_ran_not_itself() {
    let mut engine = engine_with_threshold(5000);
    engine.set_capture_effects(true);
    let mut s = engine.new_session();
    let script = "redis.call('set', KEYS[1], ARGV[1]); redis.call('incr', 'n'); \
                  local m = redis.call('spop', 'set'); return redis.call('get', KEYS[1])";
    run(&mut engine, &mut s, &["SADD", "set", "only"]);
    logged(&mut engine);
    assert_eq!(
        run(&mut engine, &mut s, &["EVAL", script, "1", "k", "v"]),
        Reply::Bulk(b"v".to_vec())
    );
    // SPOP is logged as SREM of what it popped: replay needs no Lua.
    assert_eq!(
        logged(&mut engine),
        vec![
            vec!["set", "k", "v"],
            vec!["incr", "n"],
            vec!["SREM", "set", "only"],
        ]
    );
    // A read-only script logs nothing; neither does a refused one.
    run(
        &mut engine,
        &mut s,
        &["EVAL", "return redis.call('get', 'k')", "0"],
    );
    run(
        &mut engine,
        &mut s,
        &["EVAL_RO", "return redis.call('set', 'k', 'x')", "0"],
    );
    assert!(logged(&mut engine).is_empty());
    // redis.set_repl(redis.REPL_NONE) keeps later commands out of the log.
    run(
        &mut engine,
        &mut s,
        &[
            "EVAL",
            "redis.call('set','a','1'); redis.set_repl(redis.REPL_NONE); redis.call('set','b','2')",
            "0",
        ],
    );
    assert_eq!(logged(&mut engine), vec![vec!["set", "a", "1"]]);
}

#[test]
fn select_in_a_script_logs_the_scripts_database() {
    let mut engine = engine_with_threshold(5000);
    engine.set_capture_effects(true);
    let mut s = engine.new_session();
    run(
        &mut engine,
        &mut s,
        &[
            "EVAL",
            "redis.call('select', '3'); redis.call('set', 'x', '1')",
            "0",
        ],
    );
    let effects = engine.take_effects();
    assert_eq!(effects.len(), 1);
    assert_eq!(effects[0].db, 3);
    // The caller stays in its database.
    assert_eq!(s.db, 0);
}

#[test]
fn lrand48_matches_the_c_library_sequence() {
    // The first values of lrand48() after srand48(0), as glibc gives.
    let r = super::Lrand48(std::sync::atomic::AtomicU64::new(0));
    r.seed(0);
    assert_eq!(
        [r.next(), r.next(), r.next()],
        [366850414, 1610402240, 206956554]
    );
}

/// A new Lua state holds no setup garbage: what INFO `used_memory_lua`
/// reports after SCRIPT FLUSH stays under the bound Redis's own suite
/// checks after 10000 EVALs ("EVAL does not leak in the Lua stack").
#[test]
fn a_new_lua_state_reports_only_what_it_holds() {
    let scripting = super::Scripting::new().unwrap();
    let bytes = scripting.lua_bytes();
    assert!(bytes < 100 * 1024, "a new state holds {bytes} bytes");
}
