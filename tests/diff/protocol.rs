//! Differential tests: the wire protocol (framing, inline commands,
//! pipelining, protocol errors).

use crate::harness::Pair;

#[test]
fn ping_echo_and_unknown_command() {
    let mut p = Pair::new();
    p.script(
        "PING\n\
         PING hello\n\
         FOOBAR a b c\n\
         foobar\n",
    );
}
