//! Loading a configuration: redis.conf text (with `include`), the
//! command line (`--name value` flags, `-` for stdin), the startup refusals.

use super::params::*;
use super::*;

/// A configuration that could not be loaded, with what Redis would print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The line number (1-based) and the offending line, when the error
    /// comes from a line.
    pub line: Option<(usize, String)>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    /// Redis's fatal configuration error report.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "\n*** FATAL CONFIG FILE ERROR (hozon {}) ***",
            env!("CARGO_PKG_VERSION")
        )?;
        if let Some((number, line)) = &self.line {
            writeln!(f, "Reading the configuration file, at line {number}")?;
            writeln!(f, ">>> '{line}'")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    fn plain(message: impl Into<String>) -> ConfigError {
        ConfigError {
            line: None,
            message: message.into(),
        }
    }
}

/// What the command line asked for besides configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Run the server with this configuration.
    Run(Box<Config>),
    /// `--version` / `-v`.
    Version,
    /// `--help` / `-h`.
    Help,
}

/// Where a configuration line came from, for include paths.
const MAX_INCLUDE_DEPTH: usize = 16;

impl Config {
    /// Applies configuration text (redis.conf syntax: `name value …` per
    /// line, `#` comments, quoting as in redis-cli, `include <file>`).
    /// Line numbers in errors count from 1 in `text`. `rename-command`
    /// lines are checked against `commands` ([`Config::apply_text`] passes
    /// hozon's command table).
    pub fn apply_text_with_commands(
        &mut self,
        text: &[u8],
        commands: &dyn CommandCatalog,
    ) -> Result<(), ConfigError> {
        let mut state = LoadState {
            reading_file: true,
            save_seen: false,
        };
        self.apply_text_with(text, &mut state, 0, commands)?;
        Ok(())
    }

    fn apply_text_with(
        &mut self,
        text: &[u8],
        state: &mut LoadState,
        depth: usize,
        commands: &dyn CommandCatalog,
    ) -> Result<(), ConfigError> {
        for (index, raw) in text.split(|&b| b == b'\n').enumerate() {
            let line = trim(raw);
            if line.is_empty() || line[0] == b'#' {
                continue;
            }
            let at = |message: String| ConfigError {
                line: Some((index + 1, String::from_utf8_lossy(line).into_owned())),
                message,
            };
            let Some(args) = crate::resp::split_args(line) else {
                return Err(at("Unbalanced quotes in configuration line".into()));
            };
            if args.is_empty() {
                continue;
            }
            let name = args[0].to_ascii_lowercase();
            let values: Vec<&[u8]> = args[1..].iter().map(|a| a.as_slice()).collect();
            if let Some(param) = lookup(&name) {
                if !param.is_multi_arg() && values.len() != 1 {
                    return Err(at("wrong number of arguments".into()));
                }
                let result = if param.is_multi_arg() && values.len() == 1 && !values[0].is_empty() {
                    // `--bind "a b"` arrives as one word: split it.
                    let Some(words) = crate::resp::split_args(values[0]) else {
                        return Err(at("Unbalanced quotes in configuration line".into()));
                    };
                    let refs: Vec<&[u8]> = words.iter().map(|w| w.as_slice()).collect();
                    param.set(self, &refs, state)
                } else {
                    param.set(self, &values, state)
                };
                result.map_err(at)?;
                self.ops.note_written(param.name);
                continue;
            }
            if DEPRECATED.iter().any(|d| d.as_bytes() == name.as_slice()) && args.len() == 2 {
                continue;
            }
            if name == b"rename-command" && args.len() == 3 {
                self.command_renames
                    .rename(&args[1], &args[2], commands)
                    .map_err(at)?;
                continue;
            }
            if (name == b"replicaof" || name == b"slaveof") && args.len() == 3 {
                self.replica.replicaof =
                    super::replica::parse_replicaof(&args[1], &args[2]).map_err(at)?;
                continue;
            }
            if name == b"user" && args.len() >= 2 {
                super::acl::add_user(&mut self.acl, &args[1..], commands).map_err(at)?;
                continue;
            }
            if name == b"include" && args.len() == 2 {
                if depth >= MAX_INCLUDE_DEPTH {
                    return Err(at("include nesting is too deep".into()));
                }
                let path = String::from_utf8_lossy(&args[1]).into_owned();
                for file in include_targets(&path).map_err(at)? {
                    let content = std::fs::read(&file).map_err(|e| {
                        at(format!(
                            "Fatal error, can't open config file '{}': {}",
                            file.display(),
                            os_error_text(&e)
                        ))
                    })?;
                    self.apply_text_with(&content, state, depth + 1, commands)?;
                }
                continue;
            }
            let shown = String::from_utf8_lossy(&name).into_owned();
            if REDIS_ONLY_PARAMS.contains(&shown.as_str()) {
                return Err(at(format!("'{shown}' is a Redis directive hozon does not support; remove it from the configuration")));
            }
            return Err(at("Bad directive or wrong number of arguments".into()));
        }
        Ok(())
    }

    /// Parses a `redis-server`-style command line (without the program
    /// name): `[config-file | -] [--name value …]`, reading `-`
    /// (configuration from standard input) from `stdin`. Flags are turned
    /// into configuration lines appended after the file, exactly as
    /// `redis-server` does, so a flag overrides the file and error line
    /// numbers count the file's lines first. `rename-command` lines are
    /// checked against `commands` ([`Config::from_args`] passes hozon's
    /// command table).
    pub fn from_args_with_commands(
        args: &[String],
        stdin: &mut dyn std::io::Read,
        commands: &dyn CommandCatalog,
    ) -> Result<Invocation, ConfigError> {
        let mut config = Config::default();
        if args.is_empty() {
            return Ok(Invocation::Run(Box::new(config)));
        }
        match args[0].as_str() {
            "-v" | "--version" => return Ok(Invocation::Version),
            "-h" | "--help" => return Ok(Invocation::Help),
            _ => {}
        }
        let mut text: Vec<u8> = Vec::new();
        let mut first_option = 0;
        if !args[0].starts_with('-') {
            let path = Path::new(&args[0]);
            let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
            text = std::fs::read(path).map_err(|e| {
                ConfigError::plain(format!(
                    "Fatal error, can't open config file '{}': {}",
                    absolute.display(),
                    os_error_text(&e)
                ))
            })?;
            config.config_file = Some(absolute);
            first_option = 1;
        }
        let (options, from_stdin) = options_text(args, first_option);
        if from_stdin {
            stdin.read_to_end(&mut text).map_err(|e| {
                ConfigError::plain(format!("reading the configuration from stdin: {e}"))
            })?;
        }
        text.push(b'\n');
        text.extend_from_slice(&options);
        config.apply_text_with_commands(&text, commands)?;
        Ok(Invocation::Run(Box::new(config)))
    }

    /// Refuses settings that need what hozon does not have yet
    /// (persistence, daemonizing). The error lists each refused
    /// setting under its reason, then what to do instead.
    pub fn check_supported(&self) -> Result<(), ConfigError> {
        let mut groups: Vec<(&'static Unsupported, Vec<String>)> = Vec::new();
        for p in PARAMS {
            let Some(why) = p.unsupported.and_then(|f| f(self)) else {
                continue;
            };
            let setting = format!("    {} {}", p.name, show_value(&p.get(self)));
            match groups.iter_mut().find(|(w, _)| std::ptr::eq(*w, why)) {
                Some((_, settings)) => settings.push(setting),
                None => groups.push((why, vec![setting])),
            }
        }
        if groups.is_empty() {
            return Ok(());
        }
        let text: Vec<String> = groups
            .iter()
            .map(|(why, settings)| {
                format!(
                    "Refused: {}:\n{}\n{}",
                    why.reason,
                    settings.join("\n"),
                    why.remedy
                )
            })
            .collect();
        Err(ConfigError::plain(text.join("\n")))
    }

    /// The first unsupported setting as CONFIG SET reports it: the
    /// parameter name and the reason.
    pub fn first_unsupported(&self) -> Option<(&'static str, &'static str)> {
        PARAMS.iter().find_map(|p| {
            p.unsupported
                .and_then(|f| f(self))
                .map(|why| (p.name, why.reason))
        })
    }
}

/// A value as it would be written on a configuration line.
pub(super) fn show_value(value: &[u8]) -> String {
    if value.is_empty() || value.contains(&b' ') {
        let mut out = Vec::new();
        cat_repr(&mut out, value);
        String::from_utf8_lossy(&out).into_owned()
    } else {
        String::from_utf8_lossy(value).into_owned()
    }
}

/// The text of an I/O error without Rust's "(os error N)" suffix, as C's
/// `strerror` would print it.
pub fn os_error_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

pub(super) fn trim(line: &[u8]) -> &[u8] {
    let is_blank = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let start = line.iter().position(|b| !is_blank(b)).unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !is_blank(b))
        .map_or(start, |i| i + 1);
    &line[start..end]
}

/// The files an `include` names: the path itself, or with wildcards in
/// the file name, the matching files of its directory in name order (none
/// matching is fine, so an empty `conf.d` can be included).
pub(super) fn include_targets(path: &str) -> Result<Vec<PathBuf>, String> {
    let p = Path::new(path);
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !name.contains(['*', '?', '[']) {
        return Ok(vec![p.to_path_buf()]);
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            crate::glob::matches(
                name.as_bytes(),
                e.file_name().to_string_lossy().as_bytes(),
                false,
            )
        })
        .map(|e| e.path())
        .collect();
    files.sort();
    Ok(files)
}

/// Turns command-line flags into configuration text the way `redis-server`
/// does (`--port 6380 --save ''` → `port "6380"\nsave ""`). Returns the
/// text and whether `-` asked for configuration on standard input.
pub(super) fn options_text(args: &[String], first: usize) -> (Vec<u8>, bool) {
    let mut options: Vec<u8> = Vec::new();
    let mut from_stdin = false;
    let mut handled_last = true;
    let last = args.len() - 1;
    for j in first..args.len() {
        let arg = args[j].as_bytes();
        if arg == b"-" && (j == 0 || j == last) {
            from_stdin = true;
        } else if handled_last && arg.starts_with(b"--") {
            if !options.is_empty() {
                options.push(b'\n');
            }
            options.extend_from_slice(&arg[2..]);
            options.push(b' ');
            let words = crate::resp::split_args(arg).map_or(0, |w| w.len());
            if words == 1 {
                // A name alone: its value is the next argument. An empty
                // `--save` (followed by another flag or last) means `""`.
                handled_last = false;
                let is_save = arg.eq_ignore_ascii_case(b"--save");
                if is_save && (j == last || args[j + 1].starts_with("--")) {
                    options.extend_from_slice(b"\"\"");
                    handled_last = true;
                }
            } else {
                handled_last = true;
            }
        } else {
            cat_repr(&mut options, arg);
            options.push(b' ');
            handled_last = true;
        }
    }
    (options, from_stdin)
}

/// Redis's `sdscatrepr`: `s` double-quoted, with `\\`, `\"`, `\n`, `\r`,
/// `\t`, `\a`, `\b` escaped and other unprintable bytes as `\xhh`.
pub fn cat_repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}
