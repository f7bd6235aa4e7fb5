#!/usr/bin/env python3
"""Generates src/command/docs_data.rs from a reference Redis server's replies.

Usage (from the repository root):

    python3 tools/gen-command-docs/gen.py [--from FIXTURE] [-o FILE]
    python3 tools/gen-command-docs/gen.py --capture [--redis-server PATH]

The replies are captured once into a fixture committed beside this script
(redis-7.0.15-commands.json); generating reads only the fixture, so it
works offline, and a unit test (src/command/docs.rs) checks that the
committed docs_data.rs is what it makes. Defaults: --from that fixture,
-o src/command/docs_data.rs, --redis-server redis-server (Redis 7.0.15, e.g.
Debian's /usr/bin/redis-server).

With --capture the script first starts a private redis-server (no
persistence, a Unix socket in a temporary directory, no TCP port), speaks
RESP3 to it and rewrites the fixture from what the server itself reports:

- COMMAND DOCS: summary, since, group, complexity, doc flags, deprecation,
  history and argument trees;
- COMMAND INFO: arity, flags, first/last key and step (which hozon's command
  table must match, a unit test checks), ACL categories, tips, key specs and
  the flags that have no bit in hozon's command flags (no_mandatory_keys,
  no_async_loading);
- ACL CAT: the ACL category names, in the server's order;
- COMMAND GETKEYS: whether the server finds keys for a command none of
  whose key specs names a key (a dedicated key finder).

Standard library only.
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

EXPECTED_VERSION = "7.0.15"
# The captured replies, beside this script.
FIXTURE = "redis-%s-commands.json" % EXPECTED_VERSION

# Key-spec flag names as COMMAND INFO prints them; bit `i` is entry `i`.
KEY_FLAGS = ["RO", "RW", "OW", "RM", "access", "update", "insert", "delete",
             "not_key", "incomplete", "variable_flags"]
EXTRA_FLAGS = {"no_mandatory_keys": 1, "no_async_loading": 2, "asking": 4}
# Command flags with a bit in hozon's `command::flags` (bit values as
# there); the EXTRA_FLAGS (`asking` among them) have none.
CMD_FLAGS = {"write": 1 << 0, "readonly": 1 << 1, "denyoom": 1 << 2, "admin": 1 << 3,
             "pubsub": 1 << 4, "noscript": 1 << 5, "blocking": 1 << 6, "loading": 1 << 7,
             "stale": 1 << 8, "skip_monitor": 1 << 9, "skip_slowlog": 1 << 10,
             "fast": 1 << 11, "no_auth": 1 << 12, "may_replicate": 1 << 13,
             "no_multi": 1 << 14, "allow_busy": 1 << 15, "movablekeys": 1 << 16}
UNMAPPED_FLAGS = set(EXTRA_FLAGS)
DOC_FLAGS = {"deprecated": 1, "syscmd": 2}
ARG_FLAGS = {"optional": 1, "multiple": 2, "multiple_token": 4}
# Not a flag COMMAND DOCS prints: marks an argument whose token is the
# empty string (MIGRATE's `empty_string`), since hozon's `Arg` uses "" for
# "no token".
ARG_EMPTY_TOKEN = 8
# Argument fields COMMAND DOCS may print that hozon's `Arg` carries.
ARG_FIELDS = {"name", "type", "key_spec_index", "token", "since",
              "deprecated_since", "flags", "arguments"}
DOC_FIELDS = {"summary", "since", "group", "complexity", "doc_flags",
              "deprecated_since", "replaced_by", "history", "arguments",
              "subcommands"}


# --- RESP3 client -----------------------------------------------------------

class RedisError(Exception):
    pass


class Conn:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise EOFError("server closed the connection")
        self.buf += chunk

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._fill()

    def _bytes(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        """One reply. Strings become str, maps dicts (in reply order),
        arrays lists, sets SetReply lists, errors RedisError instances."""
        line = self._line()
        kind, rest = line[:1], line[1:].decode()
        if kind == b"+":
            return rest
        if kind == b"-":
            return RedisError(rest)
        if kind == b":":
            return int(rest)
        if kind in (b"$", b"="):
            if rest == "-1":
                return None
            data = self._bytes(int(rest)).decode()
            return data[4:] if kind == b"=" else data
        if kind == b"!":
            return RedisError(self._bytes(int(rest)).decode())
        if kind in (b"*", b"~", b">"):
            if rest == "-1":
                return None
            items = [self.read() for _ in range(int(rest))]
            return SetReply(items) if kind == b"~" else items
        if kind in (b"%", b"|"):
            out = {}
            for _ in range(int(rest)):
                k = self.read()
                out[k] = self.read()
            return out
        if kind == b"_":
            return None
        if kind == b"#":
            return rest == "t"
        if kind == b",":
            return float(rest)
        if kind == b"(":
            return int(rest)
        raise ValueError("unexpected RESP type %r" % line)

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self.read()

    def ok(self, *args):
        reply = self.call(*args)
        if isinstance(reply, RedisError):
            raise reply
        return reply


class SetReply(list):
    pass


# --- reference server -------------------------------------------------------

class Server:
    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="hozon-gen-docs-")
        self.sock = os.path.join(self.dir, "redis.sock")
        self.log = open(os.path.join(self.dir, "redis.log"), "w+b")
        self.proc = subprocess.Popen(
            [binary, "--port", "0", "--unixsocket", self.sock,
             "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while True:
            if self.proc.poll() is not None:
                self.log.seek(0)
                sys.exit("redis-server exited:\n" + self.log.read().decode(errors="replace"))
            if os.path.exists(self.sock):
                try:
                    self.conn = Conn(self.sock)
                    break
                except OSError:
                    pass
            if time.time() > deadline:
                self.stop()
                sys.exit("redis-server did not open %s" % self.sock)
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# --- collecting -------------------------------------------------------------

def flatten_docs(entries, out):
    for name, d in entries.items():
        out[name.lower()] = d
        flatten_docs(d.get("subcommands", {}), out)


def flatten_info(entries, out):
    for e in entries:
        out[e[0].lower()] = e
        if e[9]:
            flatten_info(e[9], out)


def collect(conn):
    hello = conn.ok("HELLO", "3")
    version = hello.get("version")
    if version != EXPECTED_VERSION:
        print("warning: reference server is Redis %s, expected %s"
              % (version, EXPECTED_VERSION), file=sys.stderr)
    acl_names = list(conn.ok("ACL", "CAT"))
    docs = {}
    flatten_docs(conn.ok("COMMAND", "DOCS"), docs)
    infos = {}
    flatten_info(conn.ok("COMMAND", "INFO"), infos)
    if set(docs) != set(infos):
        sys.exit("COMMAND DOCS and COMMAND INFO name different commands: %s"
                 % sorted(set(docs) ^ set(infos)))
    # Whether COMMAND GETKEYS accepts the command at all (Redis's
    # doesCommandHaveKeys, checked before the command's arity): asked only
    # where no key spec names a key, since otherwise the answer says
    # nothing about a key finder. A command is named with one dummy
    # argument (COMMAND GETKEYS wants two); a container cannot be named
    # alone, and has no key finder.
    getkeys = {}
    for name, info in infos.items():
        specs = info[8]
        if any("not_key" not in s["flags"] for s in specs):
            continue
        words = name.split("|") if "|" in name else [name, "x"]
        reply = conn.call("COMMAND", "GETKEYS", *words)
        if isinstance(reply, RedisError):
            msg = str(reply)
            if msg == "ERR Invalid command specified" and info[9]:
                getkeys[name] = False
                continue
            getkeys[name] = msg != "ERR The command has no key arguments"
        else:
            getkeys[name] = True
    return version, acl_names, docs, infos, getkeys


# --- Rust output ------------------------------------------------------------

def lit(s):
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == '\\':
            out.append('\\\\')
        elif ch == '\n':
            out.append('\\n')
        elif ch == '\t':
            out.append('\\t')
        elif ch == '\r':
            out.append('\\r')
        elif ord(ch) < 0x20:
            out.append('\\u{%x}' % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def bits(names, table, what):
    value = 0
    for n in names:
        if n not in table:
            sys.exit("unknown %s %r" % (what, n))
        value |= table[n]
    return value


def arg_code(a, indent, where):
    extra = set(a) - ARG_FIELDS
    if extra:
        print("warning: %s argument %s: fields %s not kept"
              % (where, a["name"], sorted(extra)), file=sys.stderr)
    flags = bits(a.get("flags", []), ARG_FLAGS, "argument flag")
    if a.get("token") == "":
        # hozon's `Arg` uses "" for "no token"; Redis prints the empty
        # token of MIGRATE's `empty_string` as an empty string.
        flags |= ARG_EMPTY_TOKEN
    subs = args_code(a.get("arguments", []), indent + 1, where)
    return "a(%s, %s, %d, %s, %s, %s, %d, %s)" % (
        lit(a["name"]), lit(a["type"]), a.get("key_spec_index", -1),
        lit(a.get("token", "")), lit(a.get("since", "")),
        lit(a.get("deprecated_since", "")), flags, subs)


def args_code(args, indent, where):
    if not args:
        return "&[]"
    pad = "    " * (indent + 1)
    inner = ",\n".join(pad + arg_code(a, indent, where) for a in args)
    return "&[\n%s,\n%s]" % (inner, "    " * indent)


def keyspec_code(s):
    flags = bits(s["flags"], {n: 1 << i for i, n in enumerate(KEY_FLAGS)}, "key-spec flag")
    bs, bspec = s["begin_search"]["type"], s["begin_search"]["spec"]
    if bs == "index":
        begin = "BeginSearch::Index(%d)" % bspec["index"]
    elif bs == "keyword":
        begin = "BeginSearch::Keyword(%s, %d)" % (lit(bspec["keyword"]), bspec["startfrom"])
    elif bs == "unknown":
        begin = "BeginSearch::Unknown"
    else:
        sys.exit("unknown begin_search type %r" % bs)
    fk, fspec = s["find_keys"]["type"], s["find_keys"]["spec"]
    if fk == "range":
        find = "FindKeys::Range { lastkey: %d, keystep: %d, limit: %d }" % (
            fspec["lastkey"], fspec["keystep"], fspec["limit"])
    elif fk == "keynum":
        find = "FindKeys::Keynum { keynumidx: %d, firstkey: %d, keystep: %d }" % (
            fspec["keynumidx"], fspec["firstkey"], fspec["keystep"])
    elif fk == "unknown":
        find = "FindKeys::Unknown"
    else:
        sys.exit("unknown find_keys type %r" % fk)
    return "KeySpec { notes: %s, flags: %d, begin: %s, find: %s }" % (
        lit(s.get("notes", "")), flags, begin, find)


def explicit_acl(cmd_flags, categories, acl_names):
    """COMMAND INFO's categories minus those Redis's setImplicitACLCategories
    adds for the command's flags (hozon adds them back from its own)."""
    cats = set()
    for c in categories:
        if not c.startswith("@") or c[1:] not in acl_names:
            sys.exit("unknown ACL category %r" % c)
        cats.add(c[1:])
    implied = set()
    if "write" in cmd_flags:
        implied.add("write")
    if "readonly" in cmd_flags and "scripting" not in cats:
        implied.add("read")
    if "admin" in cmd_flags:
        implied |= {"admin", "dangerous"}
    if "pubsub" in cmd_flags:
        implied.add("pubsub")
    if "fast" in cmd_flags:
        implied.add("fast")
    if "blocking" in cmd_flags:
        implied.add("blocking")
    if "fast" not in cats:
        implied.add("slow")
    value = 0
    for c in cats - implied:
        value |= 1 << acl_names.index(c)
    return value


def flags_code(value):
    names = ["MOVABLE_KEYS" if n == "movablekeys" else n.upper()
             for n, bit in CMD_FLAGS.items() if value & bit]
    return " | ".join(names) if names else "NONE"


def doc_code(name, d, info, getkeys, acl_names):
    extra = set(d) - DOC_FIELDS
    if extra:
        print("warning: %s: COMMAND DOCS fields %s not kept" % (name, sorted(extra)),
              file=sys.stderr)
    (_, arity, cmd_flags, first, last, step, categories, tips, specs, _subs) = info
    flags = bits([f for f in cmd_flags if f not in UNMAPPED_FLAGS], CMD_FLAGS, "command flag")
    extra_flags = sum(bit for f, bit in EXTRA_FLAGS.items() if f in cmd_flags)
    doc_flags = bits(d.get("doc_flags", []), DOC_FLAGS, "doc flag")
    history = "&[%s]" % ", ".join("(%s, %s)" % (lit(v), lit(what))
                                  for v, what in d.get("history", []))
    tips_code = "&[%s]" % ", ".join(lit(t) for t in tips)
    if specs:
        specs_code = "&[\n%s,\n    ]" % ",\n".join("        " + keyspec_code(s) for s in specs)
    else:
        specs_code = "&[]"
    # A dedicated key finder shows where COMMAND GETKEYS accepts a command
    # no key spec of which names a key, or where COMMAND INFO says
    # movablekeys though every key spec is a fixed index and range (Redis's
    # populateCommandMovableKeys).
    if name in getkeys:
        getkeys_proc = getkeys[name]
    else:
        getkeys_proc = "movablekeys" in cmd_flags and all(
            s["begin_search"]["type"] == "index" and s["find_keys"]["type"] == "range"
            for s in specs)
    return ("Doc {\n"
            "    name: %s,\n    arity: %d,\n    flags: %s,\n    keys: (%d, %d, %d),\n    summary: %s,\n    since: %s,\n    group: %s,\n    complexity: %s,\n"
            "    doc_flags: %d,\n    deprecated_since: %s,\n    replaced_by: %s,\n    history: %s,\n"
            "    args: %s,\n    acl: %d,\n    tips: %s,\n    key_specs: %s,\n    extra_flags: %d,\n"
            "    getkeys_proc: %s,\n}") % (
        lit(name), arity, flags_code(flags), first, last, step, lit(d.get("summary", "")), lit(d.get("since", "")), lit(d["group"]),
        lit(d.get("complexity", "")), doc_flags, lit(d.get("deprecated_since", "")),
        lit(d.get("replaced_by", "")), history, args_code(d.get("arguments", []), 1, name),
        explicit_acl(cmd_flags, categories, acl_names), tips_code, specs_code, extra_flags,
        "true" if getkeys_proc else "false")


def render(fixture, version, acl_names, docs, infos, getkeys):
    out = [HEADER.replace("@VERSION@", version).replace("@FIXTURE@", fixture).replace(
        "@ACL_NAMES@", "".join("    %s,\n" % lit(n) for n in acl_names))]
    out.append("/// Every command and subcommand of the reference server, sorted by\n"
               "/// full name.\n#[rustfmt::skip]\npub static DOCS: &[Doc] = &[\n")
    for name in sorted(docs, key=lambda n: n.encode()):
        out.append(doc_code(name, docs[name], infos[name], getkeys, acl_names) + ",\n")
    out.append("];\n")
    return "".join(out)


HEADER = '''\
// @generated by tools/gen-command-docs/gen.py from
// tools/gen-command-docs/@FIXTURE@ (Redis @VERSION@'s replies).
// Do not edit by hand: regenerate with
// `python3 tools/gen-command-docs/gen.py` (see that script).

//! The command metadata table (data only; the types and the lookup are in
//! `docs.rs`).

use super::docs::{a, BeginSearch, Doc, FindKeys, KeySpec};
use super::flags::*;

/// ACL category names (bit `i` is entry `i`), in COMMAND INFO's order
/// (ACL CAT's).
pub const ACL_NAMES: &[&str] = &[
@ACL_NAMES@];

'''


# --- fixture ----------------------------------------------------------------
#
# The captured replies, one JSON object: the server version, ACL CAT, and
# per command (full lower-case name, subcommands flattened out) its COMMAND
# DOCS entry (without its subcommands), its COMMAND INFO entry (element 9,
# the subcommands, reduced to their names) and, where it was asked, whether
# COMMAND GETKEYS accepts it. One command per line, so a new server
# version's changes read as a diff.

def capture(data):
    version, acl_names, docs, infos, getkeys = data
    lines = ["{",
             '"version": %s,' % json.dumps(version),
             '"acl_cat": %s,' % json.dumps(acl_names),
             '"commands": {']
    names = sorted(docs, key=lambda n: n.encode())
    for i, name in enumerate(names):
        doc = {k: v for k, v in docs[name].items() if k != "subcommands"}
        info = list(infos[name])
        info[9] = [sub[0].lower() for sub in info[9] or []]
        entry = {"docs": doc, "info": info}
        if name in getkeys:
            entry["getkeys"] = getkeys[name]
        lines.append("%s: %s%s" % (json.dumps(name), json.dumps(entry, separators=(",", ":")),
                                   "," if i + 1 < len(names) else ""))
    lines += ["}", "}"]
    return "\n".join(lines) + "\n"


def load(path):
    with open(path) as f:
        fixture = json.load(f)
    docs, infos, getkeys = {}, {}, {}
    for name, entry in fixture["commands"].items():
        docs[name] = entry["docs"]
        infos[name] = entry["info"]
        if "getkeys" in entry:
            getkeys[name] = entry["getkeys"]
    return fixture["version"], fixture["acl_cat"], docs, infos, getkeys


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--capture", action="store_true",
                   help="ask a reference redis-server and rewrite the fixture first")
    p.add_argument("--redis-server", default="redis-server",
                   help="the reference server for --capture")
    p.add_argument("--from", dest="fixture", default=os.path.join(here, FIXTURE),
                   help="the captured replies (default: %s)" % FIXTURE)
    p.add_argument("-o", "--output",
                   default=os.path.join(root, "src", "command", "docs_data.rs"))
    opts = p.parse_args()
    if opts.capture:
        server = Server(opts.redis_server)
        try:
            data = collect(server.conn)
            server.conn.close()
        finally:
            server.stop()
        with open(opts.fixture, "w") as f:
            f.write(capture(data))
        print("wrote %s" % opts.fixture, file=sys.stderr)
    data = load(opts.fixture)
    text = render(os.path.basename(opts.fixture), *data)
    with open(opts.output, "w") as f:
        f.write(text)
    print("wrote %s (%d commands and subcommands)" % (opts.output, len(data[2])),
          file=sys.stderr)


if __name__ == "__main__":
    main()
