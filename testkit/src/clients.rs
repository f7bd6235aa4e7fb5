//! The real client programs the tests run (redis-py and ioredis, at the
//! versions tests/clients/ pins; scripts/test installs them): where they
//! are, checked against the pins, and running one to completion.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The repository's root (testkit/ is one of its directories).
pub fn repo_root() -> PathBuf {
    let testkit = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    testkit.parent().map(PathBuf::from).unwrap_or(testkit)
}

const INSTALL_PYTHON: &str = "scripts/test installs it; by hand: python3 -m venv target/pyclients \
     && target/pyclients/bin/pip install -r tests/clients/requirements.txt";
const INSTALL_NODE: &str = "scripts/test installs it; by hand: npm ci --prefix tests/clients/node";

/// The text between `"<name>": "` (or `<name>==`) and the next quote or
/// line end in `text`: the pinned or installed version.
pub fn version_after(text: &str, marker: &str) -> Option<String> {
    let start = text.find(marker)? + marker.len();
    let rest = &text[start..];
    let end = rest.find(['"', '\n', ' ', ';']).unwrap_or(rest.len());
    Some(rest[..end].trim().to_string())
}

/// The venv's python, after checking that it has the pinned redis-py.
pub fn python_with_redis_py() -> PathBuf {
    let root = repo_root();
    let requirements = std::fs::read_to_string(root.join("tests/clients/requirements.txt"))
        .expect("tests/clients/requirements.txt is part of the repository");
    let pinned = version_after(&requirements, "\nredis==")
        .expect("tests/clients/requirements.txt pins redis==<version>");
    let python = root.join("target/pyclients/bin/python");
    let installed = Command::new(&python)
        .args(["-c", "import redis; print(redis.__version__)"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string());
    match installed {
        Some(version) if version == pinned => python,
        Some(version) => panic!(
            "target/pyclients has redis-py {version}, the tests pin {pinned}: {INSTALL_PYTHON}"
        ),
        None => panic!(
            "redis-py {pinned} is not installed in target/pyclients (a Python venv): {INSTALL_PYTHON}"
        ),
    }
}

/// The Node client directory, after checking that it has the pinned ioredis.
pub fn node_client_dir() -> PathBuf {
    let dir = repo_root().join("tests/clients/node");
    let manifest = std::fs::read_to_string(dir.join("package.json"))
        .expect("tests/clients/node/package.json is part of the repository");
    let pinned =
        version_after(&manifest, "\"ioredis\": \"").expect("package.json pins ioredis exactly");
    let installed = std::fs::read_to_string(dir.join("node_modules/ioredis/package.json"))
        .ok()
        .and_then(|text| version_after(&text, "\"version\": \""));
    match installed {
        Some(version) if version == pinned => dir,
        Some(version) => panic!(
            "tests/clients/node has ioredis {version}, package.json pins {pinned}: {INSTALL_NODE}"
        ),
        None => panic!("ioredis {pinned} is not installed in tests/clients/node: {INSTALL_NODE}"),
    }
}

/// Runs a client program to completion (killed after `limit`); panics with
/// its output unless it exits 0. Returns its output.
pub fn run_client(mut command: Command, what: &str, limit: Duration) -> String {
    let log = tempfile::NamedTempFile::new().expect("temp file for a client's output");
    let stdout = log.reopen().expect("reopen the client log");
    let stderr = log.reopen().expect("reopen the client log");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("could not start {what}: {e}"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the client") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut output = String::new();
    std::fs::File::open(log.path())
        .and_then(|mut f| f.read_to_string(&mut output))
        .expect("read the client's output");
    match status {
        Some(status) if status.success() => output,
        Some(status) => panic!("{what} failed ({status}); its output:\n{output}"),
        None => panic!("{what} did not finish within {limit:?}; its output:\n{output}"),
    }
}
