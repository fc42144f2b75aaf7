//! Signing in: the decisions behind accounts, sessions and personal access tokens.
//! No I/O, no clock, no randomness: the caller passes the instant and the random
//! bytes, and stores what comes back.
//!
//! - Passwords: between [`MIN_PASSWORD_CHARS`] and [`MAX_PASSWORD_CHARS`] characters,
//!   hashed with argon2id at OWASP's parameters (19 MiB, 2 passes, 1 lane) into a PHC
//!   string; a stored hash that does not parse is an error, never a match.
//! - Personal access tokens: `cpat_`, 30 base62 characters of randomness and 6 of a
//!   CRC32 checksum over them (the layout GitHub's tokens use), so that a secret
//!   scanner recognises one and rejects a mistyped one without asking the server.
//! - Refresh tokens rotate: a token is used once; using it again after
//!   [`REFRESH_GRACE`] is reuse, and its whole family ends (RFC 9700 4.14.2);
//!   within the grace window the second use loses without ending anything (two tabs
//!   refreshing at once).
//! - Throttling: per account and per client address, failures within a window slow
//!   the next attempt and then refuse it for a while.
//! - Scopes: a personal access token may be bound to one organization and a subset
//!   of the user's permissions there.

use std::collections::BTreeSet;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use chrono::{DateTime, Duration, Utc};

use crate::permission::Permission;

/// The shortest password accepted, in characters (OWASP ASVS 5.0 6.2.1).
pub const MIN_PASSWORD_CHARS: usize = 8;
/// The longest password accepted, in characters (ASVS asks for at least 64).
pub const MAX_PASSWORD_CHARS: usize = 128;
/// argon2id's memory, in KiB (OWASP's password storage cheat sheet: 19 MiB).
pub const ARGON2_MEMORY_KIB: u32 = 19_456;
/// argon2id's passes.
pub const ARGON2_PASSES: u32 = 2;
/// The prefix of every personal access token.
pub const PERSONAL_TOKEN_PREFIX: &str = "cpat_";
/// Characters of randomness in a personal access token.
pub const PERSONAL_TOKEN_RANDOM: usize = 30;
/// Characters of checksum at its end.
const CHECKSUM_CHARS: usize = 6;
/// The longest a personal access token may live.
pub const MAX_PERSONAL_TOKEN_LIFETIME: Duration = Duration::days(366);
/// How long after a refresh token's use a second use counts as a race, not reuse.
pub const REFRESH_GRACE: Duration = Duration::seconds(10);

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Why a sign-in value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignInError {
    /// A new password breaks the policy (400, naming the field).
    #[error("{0}")]
    WeakPassword(String),
    /// A stored password hash does not parse: the account cannot sign in until it
    /// is reset (fail closed).
    #[error("the stored password hash is unreadable")]
    UnreadableHash,
    /// The hash could not be computed.
    #[error("the password could not be hashed: {0}")]
    Hashing(String),
    /// A personal access token's layout or checksum is wrong.
    #[error("the personal access token is malformed")]
    MalformedToken,
}

/// Checks a new password: its length in characters, no control characters, and not
/// the account's own e-mail.
pub fn check_password(password: &str, email: &str) -> Result<(), SignInError> {
    let chars = password.chars().count();
    if chars < MIN_PASSWORD_CHARS {
        return Err(SignInError::WeakPassword(format!(
            "must be at least {MIN_PASSWORD_CHARS} characters"
        )));
    }
    if chars > MAX_PASSWORD_CHARS {
        return Err(SignInError::WeakPassword(format!(
            "must be at most {MAX_PASSWORD_CHARS} characters"
        )));
    }
    if password.chars().any(char::is_control) {
        return Err(SignInError::WeakPassword(
            "must not contain control characters".to_owned(),
        ));
    }
    if password.trim().eq_ignore_ascii_case(email.trim()) {
        return Err(SignInError::WeakPassword(
            "must not be the account's e-mail".to_owned(),
        ));
    }
    Ok(())
}

fn argon2() -> Result<Argon2<'static>, SignInError> {
    let params = Params::new(ARGON2_MEMORY_KIB, ARGON2_PASSES, 1, None)
        .map_err(|e| SignInError::Hashing(e.to_string()))?;
    Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
}

/// Hashes a password with argon2id and `salt` (16 random bytes) into a PHC string.
/// CPU-heavy (tens of milliseconds): callers run it off their async runtime.
pub fn hash_password(password: &str, salt: &[u8; 16]) -> Result<String, SignInError> {
    let salt = SaltString::encode_b64(salt).map_err(|e| SignInError::Hashing(e.to_string()))?;
    argon2()?
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| SignInError::Hashing(e.to_string()))
}

/// Whether `password` matches a stored PHC string (in constant time for the hash).
/// A hash that does not parse is an error, never a match.
pub fn verify_password(stored: &str, password: &str) -> Result<bool, SignInError> {
    let parsed = PasswordHash::new(stored).map_err(|_| SignInError::UnreadableHash)?;
    if parsed.algorithm != argon2::ARGON2ID_IDENT {
        return Err(SignInError::UnreadableHash);
    }
    Ok(argon2()?
        .verify_password(password.as_bytes(), &parsed)
        .is_ok())
}

fn base62(value: u64, width: usize) -> String {
    let mut digits = vec![b'0'; width];
    let mut rest = value;
    for digit in digits.iter_mut().rev() {
        let index = usize::try_from(rest % 62).unwrap_or(0);
        *digit = BASE62.get(index).copied().unwrap_or(b'0');
        rest /= 62;
    }
    String::from_utf8(digits).unwrap_or_default()
}

fn checksum(random: &str) -> String {
    base62(
        u64::from(crc32fast::hash(random.as_bytes())),
        CHECKSUM_CHARS,
    )
}

/// A personal access token made of `random` (one byte per character).
///
/// ```
/// let token = tenancy::personal_token(&[7; 30]);
/// assert!(token.starts_with("cpat_"));
/// assert_eq!(token.len(), 5 + 30 + 6);
/// assert!(tenancy::check_personal_token(&token).is_ok());
/// ```
pub fn personal_token(random: &[u8; PERSONAL_TOKEN_RANDOM]) -> String {
    let body: String = random
        .iter()
        .map(|b| char::from(BASE62.get(usize::from(*b) % 62).copied().unwrap_or(b'0')))
        .collect();
    let check = checksum(&body);
    format!("{PERSONAL_TOKEN_PREFIX}{body}{check}")
}

/// Whether a bearer credential is meant as a personal access token (its prefix).
pub fn is_personal_token(credential: &str) -> bool {
    credential.starts_with(PERSONAL_TOKEN_PREFIX)
}

/// Checks a personal access token's layout and checksum.
pub fn check_personal_token(token: &str) -> Result<(), SignInError> {
    let rest = token
        .strip_prefix(PERSONAL_TOKEN_PREFIX)
        .ok_or(SignInError::MalformedToken)?;
    if rest.len() != PERSONAL_TOKEN_RANDOM + CHECKSUM_CHARS
        || !rest.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return Err(SignInError::MalformedToken);
    }
    let (body, check) = rest.split_at(PERSONAL_TOKEN_RANDOM);
    if checksum(body) == check {
        Ok(())
    } else {
        Err(SignInError::MalformedToken)
    }
}

/// The last characters of a token, shown in lists so that its owner recognises it.
pub fn token_hint(token: &str) -> String {
    let start = token.len().saturating_sub(4);
    token.get(start..).unwrap_or_default().to_owned()
}

/// What a refresh token that was already used means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecondUse {
    /// Used moments ago (within [`REFRESH_GRACE`]): another request of the same
    /// client won the race; this one loses and nothing ends.
    LostRace,
    /// Used before that: a stolen token replayed, or its thief's; the family ends.
    Reuse,
}

/// Judges the second use of a refresh token first used at `used_at`.
pub fn second_use(used_at: DateTime<Utc>, now: DateTime<Utc>) -> SecondUse {
    if now.signed_duration_since(used_at) <= REFRESH_GRACE {
        SecondUse::LostRace
    } else {
        SecondUse::Reuse
    }
}

/// How failed sign-ins are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottlePolicy {
    /// Failures answered without delay.
    pub free: u32,
    /// Failures after which attempts are refused until `lockout` after the last.
    pub lock_after: u32,
    /// Failures older than this (from the first of a run) are forgotten.
    pub window: Duration,
    /// How long attempts are refused after `lock_after` failures.
    pub lockout: Duration,
    /// The longest delay before answering.
    pub max_delay: std::time::Duration,
}

impl Default for ThrottlePolicy {
    fn default() -> Self {
        ThrottlePolicy {
            free: 3,
            lock_after: 10,
            window: Duration::minutes(15),
            lockout: Duration::minutes(15),
            max_delay: std::time::Duration::from_secs(2),
        }
    }
}

/// The failures recorded for one account or one client address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failures {
    /// How many in the current run.
    pub count: u32,
    /// When the run began.
    pub first_at: DateTime<Utc>,
    /// The latest.
    pub last_at: DateTime<Utc>,
}

/// What an attempt gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throttle {
    /// Answered at once.
    Open,
    /// Answered after a delay.
    Slow(std::time::Duration),
    /// Refused (429) until then.
    Locked(DateTime<Utc>),
}

/// An attempt charged against the failures before it is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    /// The attempt may be judged: the failures counting it (as if it failed; a
    /// success gives it back), and how long to wait before answering.
    Taken(Failures, std::time::Duration),
    /// Refused (429) until then: nothing is charged.
    Locked(DateTime<Utc>),
}

impl ThrottlePolicy {
    /// Charges one attempt at `now` against `failures` before it is judged, so that
    /// concurrent attempts each count the ones in flight: at most `lock_after`
    /// attempts are ever judged per run, whatever the concurrency. A run that began
    /// before the window, or whose lockout has passed, starts again at one.
    ///
    /// ```
    /// use chrono::{Duration, TimeZone, Utc};
    /// use tenancy::{Charge, Failures, ThrottlePolicy};
    /// let policy = ThrottlePolicy::default();
    /// let now = Utc.with_ymd_and_hms(2026, 11, 28, 12, 0, 0).unwrap();
    /// let Charge::Taken(first, wait) = policy.charge(None, now) else { panic!() };
    /// assert_eq!((first.count, wait.as_millis()), (1, 0));
    /// let nine = Failures { count: 9, first_at: now - Duration::minutes(1), last_at: now };
    /// let Charge::Taken(tenth, _) = policy.charge(Some(&nine), now) else { panic!() };
    /// assert_eq!(tenth.count, 10);
    /// assert_eq!(policy.charge(Some(&tenth), now), Charge::Locked(now + policy.lockout));
    /// ```
    pub fn charge(&self, failures: Option<&Failures>, now: DateTime<Utc>) -> Charge {
        let delay = match self.judge(failures, now) {
            Throttle::Locked(until) => return Charge::Locked(until),
            Throttle::Slow(delay) => delay,
            Throttle::Open => std::time::Duration::ZERO,
        };
        let after = match failures {
            Some(f) if f.first_at >= self.forgotten_since(now) && f.count < self.lock_after => {
                Failures {
                    count: f.count.saturating_add(1),
                    first_at: f.first_at,
                    last_at: now,
                }
            }
            _ => Failures {
                count: 1,
                first_at: now,
                last_at: now,
            },
        };
        Charge::Taken(after, delay)
    }

    /// When a run that began at `first_at` is forgotten.
    pub fn forgotten_since(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now - self.window
    }

    /// What the next attempt gets after `failures`.
    pub fn judge(&self, failures: Option<&Failures>, now: DateTime<Utc>) -> Throttle {
        let Some(f) = failures else {
            return Throttle::Open;
        };
        if f.count >= self.lock_after {
            let until = f.last_at + self.lockout;
            if now < until {
                return Throttle::Locked(until);
            }
            return Throttle::Open;
        }
        if f.first_at < self.forgotten_since(now) || f.count <= self.free {
            return Throttle::Open;
        }
        let doublings = (f.count - self.free).min(16);
        let delay = std::time::Duration::from_millis(125u64 << doublings);
        Throttle::Slow(delay.min(self.max_delay))
    }
}

/// A personal access token's bounds: one organization, and optionally a subset of
/// the user's permissions there. The gate asks it before and after the user's own
/// standing: it only ever takes away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenScope {
    /// The one organization the token acts in.
    pub org_id: String,
    /// The permissions it may use there (all of the user's when `None`).
    pub permissions: Option<BTreeSet<Permission>>,
}

impl TokenScope {
    /// Whether the token may act in `org_id` at all.
    pub fn reaches(&self, org_id: &str) -> bool {
        self.org_id == org_id
    }

    /// Whether the token may use `permission` (the user must hold it too).
    pub fn allows(&self, permission: Permission) -> bool {
        self.permissions
            .as_ref()
            .is_none_or(|set| set.contains(&permission))
    }

    /// The user's permissions, cut to the token's.
    pub fn restrict(&self, held: BTreeSet<Permission>) -> BTreeSet<Permission> {
        match &self.permissions {
            None => held,
            Some(set) => held.intersection(set).copied().collect(),
        }
    }
}

/// Seconds per authenticator code (RFC 6238's recommended step).
pub const TOTP_STEP_SECONDS: u64 = 30;

fn authenticator(secret: &[u8]) -> Result<totp_rs::TOTP, SignInError> {
    totp_rs::TOTP::new(
        totp_rs::Algorithm::SHA1,
        6,
        0,
        TOTP_STEP_SECONDS,
        secret.to_vec(),
    )
    .map_err(|e| SignInError::Hashing(format!("authenticator secret: {e}")))
}

/// The authenticator code of `secret` at `unix` seconds (HMAC-SHA-1, 6 digits,
/// 30-second steps: what authenticator apps show).
pub fn totp_code(secret: &[u8], unix: u64) -> Result<String, SignInError> {
    Ok(authenticator(secret)?.generate(unix))
}

/// The step an authenticator `code` is good for at `unix` seconds: the current one
/// or one either side (clock drift), never one at or before `last_used` (a code is
/// good once). `None` when it is good for none.
pub fn totp_step(
    secret: &[u8],
    code: &str,
    unix: u64,
    last_used: Option<u64>,
) -> Result<Option<u64>, SignInError> {
    let totp = authenticator(secret)?;
    let code = code.trim();
    if code.len() != 6 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    let now = unix / TOTP_STEP_SECONDS;
    let mut candidates = vec![now.saturating_sub(1), now, now.saturating_add(1)];
    candidates.dedup();
    for step in candidates {
        if last_used.is_some_and(|used| step <= used) {
            continue;
        }
        if totp.check(code, step * TOTP_STEP_SECONDS) {
            return Ok(Some(step));
        }
    }
    Ok(None)
}

/// A secret as authenticator apps take it: base32 without padding.
pub fn totp_secret_text(secret: &[u8]) -> String {
    match totp_rs::Secret::Raw(secret.to_vec()).to_encoded() {
        totp_rs::Secret::Encoded(text) => text.trim_end_matches('=').to_owned(),
        totp_rs::Secret::Raw(_) => String::new(),
    }
}

/// A secret back from its base32 text.
pub fn totp_secret_bytes(text: &str) -> Result<Vec<u8>, SignInError> {
    totp_rs::Secret::Encoded(text.to_owned())
        .to_bytes()
        .map_err(|_| SignInError::Hashing("the authenticator secret is unreadable".to_owned()))
}

/// The `otpauth://` URI an authenticator app scans (Key Uri Format).
pub fn totp_uri(secret: &[u8], account: &str, issuer: &str) -> String {
    let escape = |text: &str| -> String {
        text.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    };
    format!(
        "otpauth://totp/{}:{}?secret={}&issuer={}&algorithm=SHA1&digits=6&period={TOTP_STEP_SECONDS}",
        escape(issuer),
        escape(account),
        totp_secret_text(secret),
        escape(issuer)
    )
}

/// Whether a session token is still good: a token carries the account's
/// generation it was issued under (`gen`), or, from another issuer, only its issue
/// time. Revoke-all, a password change and deletion raise the generation and record
/// when (`revoked_at`).
pub fn token_is_current(
    generation: i64,
    revoked_at: Option<DateTime<Utc>>,
    token_generation: Option<i64>,
    issued_at: Option<i64>,
) -> bool {
    match token_generation {
        Some(g) => g >= generation,
        None => match revoked_at {
            None => true,
            Some(at) => issued_at.is_some_and(|iat| iat > at.timestamp()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap_or_default()
    }

    #[test]
    fn passwords_are_checked_for_length_control_characters_and_the_email() {
        assert!(check_password("correct horse", "a@example.com").is_ok());
        assert!(check_password("short", "a@example.com").is_err());
        assert!(check_password(&"x".repeat(129), "a@example.com").is_err());
        assert!(check_password("has\0a nul byte", "a@example.com").is_err());
        assert!(check_password("A@Example.com", "a@example.com").is_err());
        // Characters, not bytes.
        assert!(check_password("ééééé", "a@example.com").is_err());
        assert!(check_password("éééééééé", "a@example.com").is_ok());
    }

    #[test]
    fn a_hash_verifies_its_password_only() {
        let hash = hash_password("correct horse", &[1; 16]).unwrap_or_default();
        assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert_eq!(verify_password(&hash, "correct horse"), Ok(true));
        assert_eq!(verify_password(&hash, "correct horsf"), Ok(false));
        assert_eq!(
            verify_password("not a hash", "x"),
            Err(SignInError::UnreadableHash)
        );
        // Another algorithm is not a match either.
        assert_eq!(
            verify_password(
                "$argon2i$v=19$m=19456,t=2,p=1$AQEBAQEBAQEBAQEBAQEBAQ$abc",
                "x"
            ),
            Err(SignInError::UnreadableHash)
        );
    }

    #[test]
    fn personal_tokens_carry_a_checksum() {
        let token = personal_token(&[200; 30]);
        assert!(is_personal_token(&token));
        assert!(check_personal_token(&token).is_ok());
        let mut typo = token.clone().into_bytes();
        if let Some(b) = typo.get_mut(10) {
            *b = if *b == b'a' { b'b' } else { b'a' };
        }
        let typo = String::from_utf8(typo).unwrap_or_default();
        assert_eq!(
            check_personal_token(&typo),
            Err(SignInError::MalformedToken)
        );
        assert!(check_personal_token("cpat_short").is_err());
        assert!(check_personal_token(&format!("{token}x")).is_err());
        assert!(check_personal_token(&token.replace("cpat_", "xpat_")).is_err());
        assert_eq!(token_hint(&token).len(), 4);
    }

    #[test]
    fn a_second_use_within_the_grace_window_is_a_race_and_after_it_reuse() {
        assert_eq!(second_use(at(0), at(3)), SecondUse::LostRace);
        assert_eq!(second_use(at(0), at(10)), SecondUse::LostRace);
        assert_eq!(second_use(at(0), at(11)), SecondUse::Reuse);
    }

    #[test]
    fn failures_slow_then_lock_then_are_forgotten() {
        let policy = ThrottlePolicy::default();
        let run = |count, first, last| Failures {
            count,
            first_at: at(first),
            last_at: at(last),
        };
        assert_eq!(policy.judge(None, at(0)), Throttle::Open);
        assert_eq!(policy.judge(Some(&run(3, 0, 1)), at(2)), Throttle::Open);
        assert_eq!(
            policy.judge(Some(&run(4, 0, 1)), at(2)),
            Throttle::Slow(std::time::Duration::from_millis(250))
        );
        assert_eq!(
            policy.judge(Some(&run(9, 0, 1)), at(2)),
            Throttle::Slow(std::time::Duration::from_secs(2))
        );
        assert_eq!(
            policy.judge(Some(&run(10, 0, 5)), at(6)),
            Throttle::Locked(at(5 + 900))
        );
        assert_eq!(policy.judge(Some(&run(10, 0, 5)), at(906)), Throttle::Open);
        // A run older than the window is forgotten.
        assert_eq!(policy.judge(Some(&run(8, 0, 5)), at(1000)), Throttle::Open);
    }

    #[test]
    fn a_scope_only_takes_away() {
        let scope = TokenScope {
            org_id: "acme".into(),
            permissions: Some([Permission::ComplianceRead].into_iter().collect()),
        };
        assert!(scope.reaches("acme"));
        assert!(!scope.reaches("globex"));
        assert!(scope.allows(Permission::ComplianceRead));
        assert!(!scope.allows(Permission::PipelinesWrite));
        let held = [Permission::PipelinesWrite].into_iter().collect();
        assert!(scope.restrict(held).is_empty());
    }

    #[test]
    fn authenticator_codes_follow_rfc_6238_and_are_good_once() {
        // RFC 6238, appendix B: SHA-1, T = 59 s gives 94287082 (8 digits).
        let secret = b"12345678901234567890";
        assert_eq!(totp_code(secret, 59).unwrap_or_default(), "287082");
        assert_eq!(totp_step(secret, "287082", 59, None), Ok(Some(1)));
        // One step of drift either way, not two.
        assert_eq!(totp_step(secret, "287082", 89, None), Ok(Some(1)));
        assert_eq!(totp_step(secret, "287082", 120, None), Ok(None));
        // Used once, never again.
        assert_eq!(totp_step(secret, "287082", 59, Some(1)), Ok(None));
        assert_eq!(totp_step(secret, "28708", 59, None), Ok(None));
        assert_eq!(totp_step(secret, "28708x", 59, None), Ok(None));
        let text = totp_secret_text(secret);
        assert_eq!(text, "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
        assert_eq!(
            totp_secret_bytes(&text).unwrap_or_default(),
            secret.to_vec()
        );
        assert!(totp_uri(secret, "a@example.com", "compliance")
            .starts_with("otpauth://totp/compliance:a%40example.com?secret=GEZDGNBV"));
    }

    #[test]
    fn tokens_issued_before_a_revocation_fail() {
        assert!(token_is_current(0, None, Some(0), Some(1)));
        assert!(!token_is_current(1, Some(at(5)), Some(0), Some(1)));
        assert!(token_is_current(1, Some(at(5)), Some(1), Some(1)));
        // Another issuer's token: by its issue time.
        assert!(!token_is_current(
            1,
            Some(at(5)),
            None,
            Some(at(5).timestamp())
        ));
        assert!(token_is_current(
            1,
            Some(at(5)),
            None,
            Some(at(6).timestamp())
        ));
        assert!(!token_is_current(1, Some(at(5)), None, None));
    }
}
