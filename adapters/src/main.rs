//! The `compliance` binary. Only the offline verbs exist so far; the server, storage
//! and the remaining verbs arrive with issue 6.

fn main() {
    eprintln!("compliance: the server and its verbs are not built yet (issue 6)");
    std::process::exit(2);
}
