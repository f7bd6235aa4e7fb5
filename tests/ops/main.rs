//! Running hozon-server as operators do (issue 28, "Configuration as
//! operators write it"): stock redis.conf files, the Unix socket, the pid
//! file, the log file and syslog, daemonizing, systemd supervision, and
//! the files shipped in contrib/. Each test starts real processes
//! (hozon-server, and redis-server or redis-cli where Redis's behaviour is
//! the reference).

mod common;

mod contrib;
mod stock_conf;
mod supervise;
mod unix_socket;
