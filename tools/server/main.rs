//! hozon-server: the hozon engine behind the Redis protocol.
//!
//! Command line as `redis-server`'s: `hozon-server [config-file | -]
//! [--name value …]`, with Redis's parameter names. Exit codes: 0 after a
//! clean shutdown (SHUTDOWN, SIGTERM, SIGINT), 1 when the configuration is
//! refused or the server cannot start.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hozon::config::{Config, Invocation};
use hozon::server::host::{self, CountingAlloc};
use hozon::server::log::{self, log, Level};
use hozon::server::Server;
use hozon::server::{listener, supervise};
use hozon::Engine;

/// Counts allocated bytes for INFO `used_memory` (see [`CountingAlloc`]).
#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config = match Config::from_args(&args) {
        Ok(Invocation::Run(config)) => *config,
        Ok(Invocation::Version) => {
            println!(
                "hozon-server v={} (Redis {} compatible) bits={}",
                env!("CARGO_PKG_VERSION"),
                hozon::REDIS_VERSION,
                usize::BITS
            );
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Help) => {
            print_usage();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = config.check_supported() {
        eprintln!("{e}");
        return ExitCode::from(1);
    }
    if !config.logfile.is_empty() {
        if let Err(why) = log::set_file(&config.logfile) {
            eprintln!(
                "{}",
                hozon::config::ConfigError {
                    line: None,
                    message: format!("Can't open the log file: {why}"),
                }
            );
            return ExitCode::from(1);
        }
    }
    log::set_level(host::log_level(config.loglevel));
    if config.ops.syslog_enabled {
        log::set_syslog(&config.ops.syslog_ident, config.syslog_facility_code());
    }
    log::set_role(b'C');
    // Before any thread starts: fork keeps only the calling thread.
    let supervised = supervise::start_supervision(&config);
    if let Some(mode) = supervised {
        config.ops.supervised = mode;
    }
    if config.daemonize && supervised.is_none() {
        if let Err(e) = supervise::daemonize() {
            eprintln!("hozon-server: cannot daemonize: {e}");
            return ExitCode::from(1);
        }
    }
    if config.ops.disable_thp {
        supervise::disable_thp();
    }
    log(
        Level::Warning,
        "oO0OoO0OoO0Oo hozon is starting oO0OoO0OoO0Oo",
    );
    log(
        Level::Warning,
        &format!(
            "hozon version={}, Redis protocol version={}, bits={}, pid={}, just started",
            env!("CARGO_PKG_VERSION"),
            hozon::REDIS_VERSION,
            usize::BITS,
            std::process::id()
        ),
    );
    if args.is_empty() {
        log(
            Level::Warning,
            "Warning: no config file specified, using the default config. In order to specify a config file use hozon-server /path/to/redis.conf",
        );
    } else {
        log(Level::Warning, "Configuration loaded");
    }
    for warning in config.inert_warnings() {
        log(Level::Warning, &warning);
    }

    let shutdown = Arc::new(AtomicBool::new(false));
    if let Err(e) = watch_signals(Arc::clone(&shutdown)) {
        return fatal(&format!("cannot install signal handlers: {e}"));
    }
    log::set_role(b'M');
    let port = config.port;
    let pidfile = config.pidfile_path().map(str::to_string);
    listener::check_backlog_setting(&config);
    // The data directory is locked here; its files load on a thread
    // while the server answers -LOADING (`Server::start_loading`).
    let (mut engine, load) = match Engine::begin_open(config) {
        Ok(e) => e,
        Err(e) => return fatal(&e.to_string()),
    };
    for notice in engine.take_notices() {
        log(Level::Warning, &notice);
    }
    log(
        Level::Notice,
        &format!("Running mode=standalone, port={port}."),
    );
    let mut server = match Server::bind(engine, shutdown) {
        Ok(s) => s,
        Err(e) => return fatal(&e.to_string()),
    };
    if let Some(path) = &pidfile {
        supervise::write_pidfile(path);
    }
    log(Level::Warning, "Server initialized");
    for addr in server.local_addrs() {
        log(Level::Notice, &format!("Listening on tcp {addr}"));
    }
    if let Some(path) = server.unix_socket_path() {
        log(Level::Notice, &format!("Listening on unix {path}"));
    }
    host::record_startup_memory();
    if let Err(e) = server.start_loading(load) {
        return fatal(&e.to_string());
    }
    // Listening, the pid file written: a daemon's parent may exit now.
    supervise::daemon_ready();
    match server.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fatal(&e.to_string()),
    }
}

/// Logs a fatal startup error (and hands it to a daemon's waiting
/// parent, which prints it); exit code 1.
fn fatal(why: &str) -> ExitCode {
    log(Level::Warning, &format!("Fatal: {why}"));
    supervise::daemon_failed(&format!("Fatal: {why}"));
    ExitCode::from(1)
}

/// Handles SIGTERM, SIGINT and SIGHUP (the log file reopened) on a
/// thread of their own: the line Redis logs
/// from its signal handler, then a shutdown request the event loop sees
/// within one tick. A second SIGINT while shutting down exits at once.
fn watch_signals(shutdown: Arc<AtomicBool>) -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if signal == SIGHUP {
                    // logrotate moved the file: write to a new one.
                    match log::reopen() {
                        Ok(true) => log(Level::Notice, "Received SIGHUP, log file reopened"),
                        Ok(false) => {}
                        Err(e) => log(
                            Level::Warning,
                            &format!("Received SIGHUP, can't reopen the log file: {e}"),
                        ),
                    }
                    continue;
                }
                let name = if signal == SIGINT {
                    "SIGINT"
                } else {
                    "SIGTERM"
                };
                let unix_s = hozon::engine::now_ms() / 1000;
                let pid = std::process::id();
                if signal == SIGINT && shutdown.load(Ordering::SeqCst) {
                    log::write_line(&format!(
                        "{pid}:signal-handler ({unix_s}) You insist... exiting now.\n"
                    ));
                    std::process::exit(1);
                }
                log::write_line(&format!(
                    "{pid}:signal-handler ({unix_s}) Received {name} scheduling shutdown...\n"
                ));
                shutdown.store(true, Ordering::SeqCst);
            }
        })?;
    Ok(())
}

fn print_usage() {
    println!(
        "Usage: hozon-server [/path/to/redis.conf] [options] [-]\n       \
         hozon-server - (read config from stdin)\n       \
         hozon-server -v or --version\n       \
         hozon-server -h or --help\n\n\
         Examples:\n       \
         hozon-server (run the server with default config)\n       \
         hozon-server /etc/hozon/6379.conf\n       \
         hozon-server --port 7777\n       \
         hozon-server --port 7777 --bind 127.0.0.1 --requirepass secret\n       \
         hozon-server /etc/myredis.conf --loglevel verbose -\n       \
         hozon-server --appendonly no --save '' (no persistence)\n\n\
         Options are Redis's configuration parameters (see CONFIG GET *)."
    );
}
