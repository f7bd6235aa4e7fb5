//! hozon-server: the hozon engine behind the Redis protocol.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use hozon::server::log::{log, Level};
use hozon::server::Server;
use hozon::{Config, Engine};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match parse_args(&args) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("*** FATAL CONFIG FILE ERROR ***\n{msg}");
            return ExitCode::from(1);
        }
    };
    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(signal, Arc::clone(&shutdown)) {
            eprintln!("cannot install signal handler: {e}");
            return ExitCode::from(1);
        }
    }
    let engine = match Engine::open(config) {
        Ok(e) => e,
        Err(e) => {
            log(Level::Warning, &format!("Fatal: {e}"));
            return ExitCode::from(1);
        }
    };
    let mut server = match Server::bind(engine, shutdown) {
        Ok(s) => s,
        Err(e) => {
            log(Level::Warning, &format!("Fatal: {e}"));
            return ExitCode::from(1);
        }
    };
    for addr in server.local_addrs() {
        log(Level::Notice, &format!("Ready to accept connections tcp {addr}"));
    }
    match server.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log(Level::Warning, &format!("Fatal: {e}"));
            ExitCode::from(1)
        }
    }
}

/// `--name value` flags (the configuration module replaces this).
fn parse_args(args: &[String]) -> Result<Config, String> {
    let mut config = Config::default();
    let mut i = 0;
    while i < args.len() {
        let name = args[i].strip_prefix("--").ok_or_else(|| format!("unexpected argument '{}'", args[i]))?;
        let value = args.get(i + 1).ok_or_else(|| format!("'{name}' needs a value"))?;
        match name {
            "port" => config.port = value.parse().map_err(|_| format!("bad port '{value}'"))?,
            "bind" => config.bind = value.split_whitespace().map(String::from).collect(),
            "protected-mode" => config.protected_mode = value == "yes",
            "requirepass" => config.requirepass = Some(value.clone().into_bytes()),
            "dir" => config.dir = value.into(),
            "appendonly" | "save" => {}
            other => return Err(format!("Bad directive or wrong number of arguments: {other}")),
        }
        i += 2;
    }
    Ok(config)
}
