//! One description of a load row's requests, sent by the examples' own loop or by
//! `wrk` (Debian's package: 2 threads, the row's connections, `WRK_SECONDS` each,
//! its Lua script written from the description), as `LOAD_TOOL` says (`wrk` or
//! `client`, the default). Users' load tools measure the way `wrk` does, so the
//! ratios `scripts/bench-server` prints are `wrk`'s.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::load::Figures;

/// A piece of a header's value or of a body: text, or the request's number (unique
/// within a run), or that number modulo `n`.
#[derive(Debug, Clone)]
pub enum Piece {
    /// Text as it is.
    Text(String),
    /// The request's number.
    Number,
    /// The request's number modulo `n`.
    Modulo(usize),
}

/// The requests of a row.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET` or `POST`.
    pub method: &'static str,
    /// The path.
    pub path: String,
    /// Its headers (a JSON body's `content-type` is added).
    pub headers: Vec<(String, Vec<Piece>)>,
    /// Its body (none when empty).
    pub body: Vec<Piece>,
    /// The status every request must answer.
    pub expect: u16,
}

impl Request {
    /// A `GET` of `path`, answering 200.
    pub fn get(path: &str) -> Request {
        Request {
            method: "GET",
            path: path.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
            expect: 200,
        }
    }

    /// A `POST` of `body` (JSON) to `path`, answering `expect`.
    pub fn post(path: &str, body: Vec<Piece>, expect: u16) -> Request {
        Request {
            method: "POST",
            path: path.to_owned(),
            headers: vec![(
                "content-type".to_owned(),
                vec![Piece::Text("application/json".to_owned())],
            )],
            body,
            expect,
        }
    }

    /// With a header.
    pub fn header(mut self, name: &str, value: Vec<Piece>) -> Request {
        self.headers.push((name.to_owned(), value));
        self
    }

    /// With a header of fixed text.
    pub fn text_header(self, name: &str, value: &str) -> Request {
        self.header(name, vec![Piece::Text(value.to_owned())])
    }

    /// The pieces made into text for request `n`.
    pub fn render(pieces: &[Piece], n: usize) -> String {
        let mut out = String::new();
        for piece in pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Number => {
                    let _ = write!(out, "{n}");
                }
                Piece::Modulo(m) => {
                    let _ = write!(out, "{}", n % (*m).max(1));
                }
            }
        }
        out
    }
}

/// Whether the rows are sent by `wrk`.
pub fn enabled() -> bool {
    std::env::var("LOAD_TOOL").is_ok_and(|tool| tool == "wrk")
}

/// A Lua string literal of `text`: quoted, with `\\`, `"` and every byte outside
/// printable ASCII written as a decimal escape.
fn lua_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for byte in text.bytes() {
        match byte {
            b'\\' | b'"' => {
                let _ = write!(out, "\\{byte:03}");
            }
            0x20..=0x7e => out.push(char::from(byte)),
            _ => {
                let _ = write!(out, "\\{byte:03}");
            }
        }
    }
    out.push('"');
    out
}

fn lua_pieces(pieces: &[Piece]) -> String {
    let parts: Vec<String> = pieces
        .iter()
        .map(|piece| match piece {
            Piece::Text(text) => lua_string(text),
            Piece::Number => "tostring(n)".to_owned(),
            Piece::Modulo(m) => format!("tostring(n % {})", (*m).max(1)),
        })
        .collect();
    if parts.is_empty() {
        "\"\"".to_owned()
    } else {
        format!("table.concat({{{}}})", parts.join(", "))
    }
}

/// The Lua script of `request`: each thread numbers its requests apart from the
/// others' (`thread * 100000000 + count`).
pub fn script(request: &Request) -> String {
    let mut lua = String::new();
    let _ = writeln!(lua, "threads_made = 0");
    let _ = writeln!(
        lua,
        "function setup(thread) thread:set(\"tid\", threads_made); threads_made = threads_made + 1 end"
    );
    let _ = writeln!(lua, "count = 0");
    let _ = writeln!(lua, "wrk.method = \"{}\"", request.method);
    let _ = writeln!(lua, "wrk.path = {}", lua_string(&request.path));
    let _ = writeln!(lua, "request = function()");
    let _ = writeln!(lua, "  count = count + 1");
    let _ = writeln!(lua, "  local n = (tid or 0) * 100000000 + count");
    let _ = writeln!(lua, "  local headers = {{}}");
    let _ = writeln!(lua, "  headers[\"Host\"] = wrk.headers[\"Host\"]");
    for (name, value) in &request.headers {
        let _ = writeln!(
            lua,
            "  headers[{}] = {}",
            lua_string(name),
            lua_pieces(value)
        );
    }
    if request.body.is_empty() {
        let _ = writeln!(lua, "  return wrk.format(nil, nil, headers, nil)");
    } else {
        let _ = writeln!(lua, "  local body = {}", lua_pieces(&request.body));
        let _ = writeln!(lua, "  return wrk.format(nil, nil, headers, body)");
    }
    let _ = writeln!(lua, "end");
    lua
}

/// Runs `wrk` against `base` with `request` for `WRK_SECONDS` (5), `in_flight`
/// connections on 2 threads: the rate of answers with the expected (2xx) status;
/// fails when more than one in a hundred answered otherwise.
pub async fn run(base: &str, request: &Request, in_flight: usize) -> Result<Figures, String> {
    let seconds: u64 = std::env::var("WRK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let dir = std::env::temp_dir().join(format!("wrk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join("row.lua");
    std::fs::write(&path, script(request)).map_err(|e| e.to_string())?;
    let url = format!("{base}{}", request.path);
    let connections = in_flight.max(2).to_string();
    let duration = format!("{seconds}s");
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("wrk")
            .args([
                "-t2",
                "-c",
                &connections,
                "-d",
                &duration,
                "--latency",
                "-s",
            ])
            .arg(&path)
            .arg(&url)
            .output()
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("wrk did not run (is Debian's wrk installed?): {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        return Err(format!(
            "wrk failed: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    parse(&text, request.expect)
}

/// The figures of `wrk --latency`'s report.
pub fn parse(text: &str, expect: u16) -> Result<Figures, String> {
    let number_after = |label: &str| -> Option<f64> {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(label))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    };
    let rate = number_after("Requests/sec:").ok_or(format!("no rate in wrk's report: {text}"))?;
    let total = text
        .lines()
        .find(|line| line.contains(" requests in "))
        .and_then(|line| line.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or(format!("no request count in wrk's report: {text}"))?;
    let failed = number_after("Non-2xx or 3xx responses:").unwrap_or(0.0) as u64;
    let errors = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("Socket errors:"))
        .map(|rest| {
            rest.split(',')
                .filter_map(|part| part.split_whitespace().nth(1))
                .filter_map(|n| n.parse::<u64>().ok())
                .sum::<u64>()
        })
        .unwrap_or(0);
    let latency = |label: &str| -> f64 {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(label))
            .and_then(|rest| rest.split_whitespace().next())
            .map(milliseconds)
            .unwrap_or(f64::NAN)
    };
    let good = total.saturating_sub(failed);
    if errors > 0 {
        return Err(format!("wrk saw {errors} socket errors: {text}"));
    }
    // An overloaded server refuses at once (503): a few such answers are reported and
    // not counted; more than one in a hundred fails the row.
    if failed > 0 {
        eprintln!("wrk: {failed} of {total} requests answered other than {expect}");
    }
    if failed * 100 > total {
        return Err(format!(
            "{failed} of {total} requests answered other than {expect}"
        ));
    }
    let rate = rate * good as f64 / total.max(1) as f64;
    let mut statuses = BTreeMap::new();
    statuses.insert(expect, good);
    Ok(Figures {
        rate,
        median_ms: latency("50%"),
        p99_ms: latency("99%"),
        statuses,
    })
}

/// `1.23ms`, `850.00us`, `1.02s` in milliseconds.
fn milliseconds(text: &str) -> f64 {
    let (number, unit) = text.split_at(
        text.find(|c: char| c.is_ascii_alphabetic())
            .unwrap_or(text.len()),
    );
    let value: f64 = number.parse().unwrap_or(f64::NAN);
    match unit {
        "us" => value / 1000.0,
        "s" => value * 1000.0,
        "m" => value * 60_000.0,
        _ => value,
    }
}
