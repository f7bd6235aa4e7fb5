//! Redis Functions, the compiled side: one Lua state (apart from EVAL's,
//! as in Redis) holding every library's registered callbacks, and the
//! index FCALL looks functions up in. The sources are persistent data kept
//! in `Core` ([`crate::core::functions::Libraries`]); this state is
//! rebuilt from them whenever their generation moved (a file loaded, a
//! FUNCTION RESTORE or FLUSH), and kept in step by FUNCTION LOAD and
//! DELETE, which change both.

use std::collections::{BTreeMap, HashMap};

use crate::core::functions::{parse_metadata, valid_name, Libraries, Source, BAD_NAME_ERR};
use crate::core::ScriptSlot;

use super::{Registered, ScriptFlags, Scripting};

/// Longest a library's code may run while it loads from a client (Redis's
/// `LOAD_TIMEOUT_MS`); loads from the AOF, a file or a master have none.
pub const LOAD_TIMEOUT_MS: u64 = 500;

/// The one engine Redis 7.0 has.
pub const ENGINE_NAME: &str = "LUA";

/// A registered function.
#[derive(Debug)]
pub struct FunctionEntry {
    /// The library that registered it.
    pub library: Vec<u8>,
    /// Its name as registered.
    pub name: Vec<u8>,
    /// Its name as text, shared (error messages of every call).
    pub name_text: std::sync::Arc<str>,
    /// Its description.
    pub description: Option<Vec<u8>>,
    /// Its flags.
    pub flags: ScriptFlags,
    /// The callback in the engine's Lua state.
    pub callback: mlua::Function,
}

/// The compiled libraries.
pub struct FunctionEngine {
    state: Scripting,
    generation: u64,
    /// Lower-cased function name → function (FCALL's names are
    /// case-insensitive, as Redis's function dictionary is).
    functions: HashMap<Vec<u8>, FunctionEntry, foldhash::fast::RandomState>,
    /// Library name → its functions' keys in `functions`, in registration
    /// order.
    libraries: BTreeMap<Vec<u8>, Vec<Vec<u8>>>,
}

impl std::fmt::Debug for FunctionEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionEngine")
            .field("libraries", &self.libraries.len())
            .field("functions", &self.functions.len())
            .finish()
    }
}

fn key(name: &[u8]) -> Vec<u8> {
    name.to_ascii_lowercase()
}

impl FunctionEngine {
    /// An engine with no libraries, at `generation`.
    fn empty(generation: u64) -> Result<FunctionEngine, String> {
        Ok(FunctionEngine {
            state: Scripting::new()?,
            generation,
            functions: HashMap::default(),
            libraries: BTreeMap::new(),
        })
    }

    /// Compiles every library of `libs` (no time limit); the error names
    /// the library that failed.
    pub fn build(libs: &Libraries) -> Result<FunctionEngine, String> {
        let mut engine = Self::empty(libs.generation())?;
        for (name, code) in libs.iter() {
            let registered = engine.compile(code, false, 0).map_err(|e| {
                format!(
                    "cannot load function library '{}': {e}",
                    String::from_utf8_lossy(name)
                )
            })?;
            engine.link(name.clone(), registered)?;
        }
        Ok(engine)
    }

    /// The engine for `libs`, taken out of `slot`: the one there when it
    /// reflects them, else a new one built from them.
    pub fn take(
        slot: &mut ScriptSlot,
        libs: &mut Libraries,
    ) -> Result<Box<FunctionEngine>, String> {
        match slot.take::<FunctionEngine>() {
            Some(engine) if engine.generation == libs.generation() => Ok(engine),
            _ => {
                let engine = if libs.is_empty() {
                    Self::empty(libs.generation())?
                } else {
                    Self::build(libs)?
                };
                libs.set_function_count(engine.functions.len());
                Ok(Box::new(engine))
            }
        }
    }

    /// Compiles the libraries of `libs` into the engine kept in `slot`
    /// unless it reflects them already (after a file or a full sync set
    /// them): the error names a library that does not load.
    pub fn sync(slot: &mut ScriptSlot, libs: &mut Libraries) -> Result<(), String> {
        let engine = Self::take(slot, libs)?;
        slot.put(engine);
        Ok(())
    }

    /// Bytes the engine's Lua state holds.
    pub fn lua_bytes(&self) -> usize {
        self.state.lua_bytes()
    }

    /// The function FCALL names (any letter case).
    pub fn function(&self, name: &[u8]) -> Option<&FunctionEntry> {
        if name.iter().any(u8::is_ascii_uppercase) {
            self.functions.get(&key(name))
        } else {
            self.functions.get(name)
        }
    }

    /// The function FCALL names (any letter case) together with the Lua
    /// state that runs it, borrowed at once (no callback reference is
    /// cloned per call).
    pub fn function_and_state(&mut self, name: &[u8]) -> Option<(&FunctionEntry, &mut Scripting)> {
        let entry = if name.iter().any(u8::is_ascii_uppercase) {
            self.functions.get(&key(name))
        } else {
            self.functions.get(name)
        }?;
        Some((entry, &mut self.state))
    }

    /// Number of functions.
    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    /// The functions of library `name`, in registration order.
    pub fn library_functions(&self, name: &[u8]) -> impl Iterator<Item = &FunctionEntry> {
        self.libraries
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(|k| self.functions.get(k))
    }

    /// FUNCTION LOAD (Redis's `functionsCreateWithLibraryCtx`): loads
    /// `code` into this engine and `libs`, replacing a library of the
    /// same name when `replace`. Returns the library name, or Redis's
    /// error text (without `ERR `); on error nothing changed.
    pub fn load(
        &mut self,
        libs: &mut Libraries,
        code: &[u8],
        replace: bool,
        limit_ms: u64,
    ) -> Result<Vec<u8>, String> {
        let meta = parse_metadata(code)?;
        if !valid_name(&meta.name) {
            return Err(BAD_NAME_ERR.into());
        }
        if !meta.engine.eq_ignore_ascii_case(ENGINE_NAME.as_bytes()) {
            return Err(format!(
                "Engine '{}' not found",
                String::from_utf8_lossy(&meta.engine)
            ));
        }
        let exists = self.libraries.contains_key(&meta.name);
        if exists && !replace {
            return Err(format!(
                "Library '{}' already exists",
                String::from_utf8_lossy(&meta.name)
            ));
        }
        let registered = self.compile(code, true, limit_ms)?;
        for r in &registered {
            if let Some(other) = self.functions.get(&key(&r.name)) {
                if other.library != meta.name {
                    return Err(format!(
                        "Function {} already exists",
                        String::from_utf8_lossy(&r.name)
                    ));
                }
            }
        }
        if exists {
            self.unlink(&meta.name);
        }
        self.link(meta.name.clone(), registered)?;
        libs.insert(meta.name.clone(), code.to_vec());
        libs.set_function_count(self.functions.len());
        self.generation = libs.generation();
        Ok(meta.name)
    }

    /// FUNCTION DELETE: removes library `name` from this engine and `libs`.
    pub fn delete(&mut self, libs: &mut Libraries, name: &[u8]) -> Result<(), String> {
        if !self.libraries.contains_key(name) {
            return Err("Library not found".into());
        }
        self.unlink(name);
        libs.remove(name);
        libs.set_function_count(self.functions.len());
        self.generation = libs.generation();
        Ok(())
    }

    /// Runs `code`'s registration in the Lua state: its functions, or the
    /// error. `checked`: the metadata was already checked by the caller.
    fn compile(
        &mut self,
        code: &[u8],
        checked: bool,
        limit_ms: u64,
    ) -> Result<Vec<Registered>, String> {
        let meta = parse_metadata(code)?;
        if !checked && !meta.engine.eq_ignore_ascii_case(ENGINE_NAME.as_bytes()) {
            return Err(format!(
                "Engine '{}' not found",
                String::from_utf8_lossy(&meta.engine)
            ));
        }
        let registered = self
            .state
            .load_library(&code[meta.body_start..], limit_ms)?;
        if registered.is_empty() {
            return Err("No functions registered".into());
        }
        Ok(registered)
    }

    fn link(&mut self, library: Vec<u8>, registered: Vec<Registered>) -> Result<(), String> {
        let mut names = Vec::with_capacity(registered.len());
        for r in registered {
            let k = key(&r.name);
            if self.functions.contains_key(&k) {
                return Err(format!(
                    "Function {} already exists",
                    String::from_utf8_lossy(&r.name)
                ));
            }
            self.functions.insert(
                k.clone(),
                FunctionEntry {
                    library: library.clone(),
                    name_text: String::from_utf8_lossy(&r.name).into(),
                    name: r.name,
                    description: r.description,
                    flags: r.flags,
                    callback: r.callback,
                },
            );
            names.push(k);
        }
        self.libraries.insert(library, names);
        Ok(())
    }

    fn unlink(&mut self, library: &[u8]) {
        for k in self.libraries.remove(library).unwrap_or_default() {
            self.functions.remove(&k);
        }
    }
}

/// FUNCTION RESTORE's merge (Redis's `libraryJoin`): the libraries that
/// result from adding `incoming` (sources, each loaded into a scratch
/// engine first) to `current`, replacing libraries of the same name when
/// `replace`; or Redis's error text. `flush` replaces everything.
pub fn restore(
    current: &Libraries,
    engine: &FunctionEngine,
    incoming: &[Vec<u8>],
    policy: RestorePolicy,
) -> Result<Vec<Source>, String> {
    let mut scratch_libs = Libraries::default();
    let mut scratch = FunctionEngine::empty(0)?;
    for code in incoming {
        scratch.load(&mut scratch_libs, code, false, 0)?;
    }
    if policy == RestorePolicy::Flush {
        return Ok(scratch_libs
            .iter()
            .map(|(n, c)| (n.clone(), c.clone()))
            .collect());
    }
    for (name, _) in scratch_libs.iter() {
        if current.code(name).is_some() && policy == RestorePolicy::Append {
            return Err(format!(
                "Library {} already exists",
                String::from_utf8_lossy(name)
            ));
        }
    }
    for entry in scratch.functions.values() {
        if let Some(other) = engine.function(&entry.name) {
            // A function of a library being replaced goes with it.
            if scratch_libs.code(&other.library).is_none() {
                return Err(format!(
                    "Function {} already exists",
                    String::from_utf8_lossy(&entry.name)
                ));
            }
        }
    }
    let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = current
        .iter()
        .map(|(n, c)| (n.clone(), c.clone()))
        .collect();
    for (name, code) in scratch_libs.iter() {
        merged.insert(name.clone(), code.clone());
    }
    Ok(merged.into_iter().collect())
}

/// FUNCTION RESTORE's policy for libraries already loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    /// Delete every library first.
    Flush,
    /// Add; a library that exists is an error (the default).
    Append,
    /// Add, replacing libraries of the same name.
    Replace,
}
