//! `maxmemory` before a command (Redis's processCommand): evictions, then
//! the OOM refusal (docs/memory.md; the eviction itself is
//! `core::evict`).

use super::dispatch::Units;
use super::Engine;
use crate::clock::now_ms;
use crate::command::{self, flags, CommandSpec, Host, Session};
use crate::reply::Reply;

impl Engine {
    /// Redis's processCommand memory check (docs/memory.md): evictions
    /// (each DEL its own logged unit), then the OOM refusal of a deny-oom
    /// command, of any command queued in MULTI, of EXEC of a transaction
    /// holding one, of a script whose flags deny it.
    pub(super) fn check_memory(
        &mut self,
        session: &Session,
        top: &'static CommandSpec,
        spec: &'static CommandSpec,
        argv: &[&[u8]],
        host: &mut dyn Host,
    ) -> Result<(), Reply> {
        let before = self.core.effects.len();
        let result = self
            .core
            .perform_evictions(&mut || host.used_memory().map(|m| m.used));
        let _ = self.log_unit(before, now_ms(), Units::EachEffect);
        let oom = result == crate::core::evict::Eviction::Fail;
        self.core.evict.pre_command_oom = oom;
        if !oom || session.is_master {
            return Ok(());
        }
        let refused = match top.name {
            "exec" => session.multi.as_ref().is_some_and(|m| {
                m.commands.iter().any(|c| {
                    let refs: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
                    command::resolve(&refs).is_ok_and(|(_, s)| s.has(flags::DENYOOM))
                })
            }),
            "discard" | "quit" | "reset" => false,
            _ if session.multi.is_some() => true,
            "eval" | "evalsha" => match self.script_flags(top.name == "evalsha", argv) {
                Some(f) if !f.compat => !(f.allow_oom || f.no_writes),
                _ => spec.has(flags::DENYOOM),
            },
            "fcall" => self
                .core
                .function_engine
                .get::<crate::script::functions::FunctionEngine>()
                .and_then(|e| argv.get(1).and_then(|n| e.function(n)))
                .map_or(spec.has(flags::DENYOOM), |f| {
                    !(f.flags.allow_oom || f.flags.no_writes)
                }),
            _ => spec.has(flags::DENYOOM),
        };
        if refused {
            return Err(Reply::error(crate::core::evict::OOM_ERROR));
        }
        Ok(())
    }

    /// True while an eviction run cut short by
    /// `maxmemory-eviction-tenacity` waits to continue: the host calls
    /// [`Engine::eviction_timer`] on its next loop turn without sleeping
    /// (Redis's zero-delay `evictionTimeProc`).
    pub(crate) fn eviction_pending(&self) -> bool {
        self.core.evict.timer
    }

    /// Redis's `evictionTimeProc`: evicts more (each DEL its own logged
    /// unit) with `used` the memory in use; the timer stops once memory is
    /// within the limit or nothing is left to evict.
    pub(crate) fn eviction_timer(&mut self, used: &mut dyn FnMut() -> Option<u64>) {
        let before = self.core.effects.len();
        self.core.eviction_timer(used);
        let _ = self.log_unit(before, now_ms(), Units::EachEffect);
    }
}
