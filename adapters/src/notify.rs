//! Outbound notifications, the parts that decide and compute without I/O: the
//! channels, the digest windows, the retry schedule, the webhook signatures (both
//! header forms), which addresses a webhook may reach, and the sealing of stored
//! secrets. The workflow is `services::notifications`; delivery is
//! `workers::delivery`.

use std::net::IpAddr;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use chrono::{DateTime, Datelike, Duration as Span, NaiveTime, TimeZone, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Where a notification goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// The organization's message inbox.
    Inbox,
    /// E-mail through `SMTP_URL`.
    Email,
    /// A POST to the preference's `webhookUrl`.
    Webhook,
}

impl Channel {
    /// Every channel.
    pub const ALL: [Channel; 3] = [Channel::Inbox, Channel::Email, Channel::Webhook];

    /// The stored and answered name.
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Inbox => "inbox",
            Channel::Email => "email",
            Channel::Webhook => "webhook",
        }
    }

    /// Reads a stored name.
    pub fn parse(name: &str) -> Option<Channel> {
        Channel::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// A digest window: the key stored with the deliveries it holds, and when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// `daily:2026-11-23` or `weekly:2026-W48`.
    pub key: String,
    /// The first instant after the window (UTC).
    pub ends: DateTime<Utc>,
}

/// The window `at` falls in for a digest mode: `daily` windows run from 00:00 UTC to
/// the next 00:00 UTC; `weekly` windows from Monday 00:00 UTC to the next Monday (ISO
/// weeks). `immediate` (or anything else) holds nothing.
pub fn window(mode: &str, at: DateTime<Utc>) -> Option<Window> {
    let day = at.date_naive();
    match mode {
        "daily" => {
            let start = day.and_time(NaiveTime::MIN);
            Some(Window {
                key: format!("daily:{}", day.format("%Y-%m-%d")),
                ends: Utc.from_utc_datetime(&start) + Span::days(1),
            })
        }
        "weekly" => {
            let week = day.iso_week();
            let monday = day - Span::days(i64::from(day.weekday().num_days_from_monday()));
            Some(Window {
                key: format!("weekly:{}-W{:02}", week.year(), week.week()),
                ends: Utc.from_utc_datetime(&monday.and_time(NaiveTime::MIN)) + Span::days(7),
            })
        }
        _ => None,
    }
}

/// When a stored window key ends; `None` for a key that does not read.
pub fn window_end(key: &str) -> Option<DateTime<Utc>> {
    if let Some(day) = key.strip_prefix("daily:") {
        let day = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").ok()?;
        return Some(Utc.from_utc_datetime(&day.and_time(NaiveTime::MIN)) + Span::days(1));
    }
    let week = key.strip_prefix("weekly:")?;
    let (year, number) = week.split_once("-W")?;
    let monday = chrono::NaiveDate::from_isoywd_opt(
        year.parse().ok()?,
        number.parse().ok()?,
        chrono::Weekday::Mon,
    )?;
    Some(Utc.from_utc_datetime(&monday.and_time(NaiveTime::MIN)) + Span::days(7))
}

/// The waits between attempts, as multiples of the base (`NOTIFY_RETRY_SECONDS`, 30):
/// with the base at 30 s, 30 s, 2 min, 10 min, 30 min, 1 h, 3 h, 6 h and 12 h, about
/// 23 hours in all. After the last, the delivery has failed.
const BACKOFF: [u32; 8] = [1, 4, 20, 60, 120, 360, 720, 1440];

/// How many attempts a delivery gets.
pub const MAX_ATTEMPTS: u32 = BACKOFF.len() as u32 + 1;

/// The wait before attempt `attempts + 1`, after `attempts` failed ones; `None` once
/// they are exhausted.
pub fn retry_after(attempts: u32, base: Duration) -> Option<Duration> {
    let index = usize::try_from(attempts.checked_sub(1)?).ok()?;
    BACKOFF
        .get(index)
        .map(|factor| base.saturating_mul(*factor))
}

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    // HMAC takes keys of any length.
    let Ok(mut mac) = HmacSha256::new_from_slice(key) else {
        return Vec::new();
    };
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

/// Document 1's header: `X-SVC-Signature: sha256=<lowercase hex HMAC-SHA256 of the raw
/// body>`, keyed by the secret's bytes.
pub fn svc_signature(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hex::encode(mac(secret.as_bytes(), &[body])))
}

/// The Standard Webhooks signature: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
/// A secret written `whsec_<base64>` is keyed by the decoded bytes, as the
/// specification's libraries expect; any other secret by its own bytes.
pub fn standard_signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    let key = secret
        .strip_prefix("whsec_")
        .and_then(|b| BASE64.decode(b).ok())
        .unwrap_or_else(|| secret.as_bytes().to_vec());
    let stamp = timestamp.to_string();
    let signature = mac(&key, &[id.as_bytes(), b".", stamp.as_bytes(), b".", body]);
    format!("v1,{}", BASE64.encode(signature))
}

/// Whether a webhook may be sent to `ip`: only a globally routable address. Every
/// special-purpose block of the IANA registries that is not globally reachable is
/// refused, and an address that embeds an IPv4 one (IPv4-mapped `::ffff:0:0/96`,
/// NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) is judged by the address it embeds.
///
/// IPv4 refused: 0/8, 10/8, 100.64/10, 127/8, 169.254/16, 172.16/12, 192.0.0/24,
/// 192.0.2/24, 192.88.99/24 (the retired 6to4 relay), 192.168/16, 198.18/15,
/// 198.51.100/24, 203.0.113/24, 224/4 and 240/4 (broadcast included).
///
/// IPv6: only global unicast (`2000::/3`) passes, which leaves out loopback,
/// unspecified, the IPv4-compatible `::/96` (`[::127.0.0.1]`), discard-only
/// `100::/64`, unique-local `fc00::/7`, link-local `fe80::/10`, the retired
/// site-local `fec0::/10`, multicast and the local-use NAT64 `64:ff9b:1::/48`; within
/// it, the IETF protocol block `2001::/23` (Teredo, benchmarking, ORCHID),
/// documentation `2001:db8::/32` and `3fff::/20`, and SRv6 `5f00::/16` are refused.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let bits = u128::from(v6);
            let in_block = |prefix: u128, len: u32| {
                let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
                bits & mask == prefix & mask
            };
            // NAT64 (well-known prefix): the IPv4 address in its last 32 bits.
            if in_block(0x0064_ff9b << 96, 96) {
                return is_public_v4(std::net::Ipv4Addr::from(bits as u32));
            }
            if !in_block(0x2000 << 112, 3) {
                return false;
            }
            // 6to4: the IPv4 address in bits 16 to 48.
            if in_block(0x2002 << 112, 16) {
                return is_public_v4(std::net::Ipv4Addr::from((bits >> 80) as u32));
            }
            !(in_block(0x2001 << 112, 23)
                || in_block(0x2001_0db8 << 96, 32)
                || in_block(0x3fff << 112, 20)
                || in_block(0x5f00 << 112, 16))
        }
    }
}

fn is_public_v4(v4: std::net::Ipv4Addr) -> bool {
    let bits = u32::from(v4);
    let in_block = |prefix: u32, len: u32| {
        let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
        bits & mask == prefix & mask
    };
    const REFUSED: [(u32, u32); 15] = [
        (0x0000_0000, 8),  // "this network"
        (0x0a00_0000, 8),  // private
        (0x6440_0000, 10), // shared (carrier-grade NAT)
        (0x7f00_0000, 8),  // loopback
        (0xa9fe_0000, 16), // link-local
        (0xac10_0000, 12), // private
        (0xc000_0000, 24), // IETF protocol assignments
        (0xc000_0200, 24), // documentation (TEST-NET-1)
        (0xc058_6300, 24), // 6to4 relay anycast (retired)
        (0xc0a8_0000, 16), // private
        (0xc612_0000, 15), // benchmarking
        (0xc633_6400, 24), // documentation (TEST-NET-2)
        (0xcb00_7100, 24), // documentation (TEST-NET-3)
        (0xe000_0000, 4),  // multicast
        (0xf000_0000, 4),  // reserved, and broadcast
    ];
    !REFUSED.iter().any(|(prefix, len)| in_block(*prefix, *len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap_or_default()
    }

    #[test]
    fn windows_are_utc_days_and_iso_weeks() {
        let daily = window("daily", at("2026-11-23T23:59:59Z")).unwrap_or_else(|| unreachable!());
        assert_eq!(daily.key, "daily:2026-11-23");
        assert_eq!(daily.ends, at("2026-11-24T00:00:00Z"));
        assert_eq!(window_end(&daily.key), Some(daily.ends));
        // 2026-11-23 is a Monday (ISO week 48); Sunday the 29th is still in it.
        let weekly = window("weekly", at("2026-11-29T12:00:00Z")).unwrap_or_else(|| unreachable!());
        assert_eq!(weekly.key, "weekly:2026-W48");
        assert_eq!(weekly.ends, at("2026-11-30T00:00:00Z"));
        assert_eq!(window_end(&weekly.key), Some(weekly.ends));
        // ISO week 1 of 2027 starts on Monday 2027-01-04; 2027-01-01 is in 2026-W53.
        let new_year =
            window("weekly", at("2027-01-01T08:00:00Z")).unwrap_or_else(|| unreachable!());
        assert_eq!(new_year.key, "weekly:2026-W53");
        assert_eq!(new_year.ends, at("2027-01-04T00:00:00Z"));
        assert_eq!(window("immediate", at("2026-11-23T00:00:00Z")), None);
        assert_eq!(window_end("hourly:2026"), None);
    }

    #[test]
    fn retries_last_about_a_day() {
        let base = Duration::from_secs(30);
        assert_eq!(retry_after(0, base), None);
        assert_eq!(retry_after(1, base), Some(Duration::from_secs(30)));
        assert_eq!(retry_after(2, base), Some(Duration::from_secs(120)));
        let total: u64 = (1..MAX_ATTEMPTS)
            .filter_map(|n| retry_after(n, base))
            .map(|d| d.as_secs())
            .sum();
        assert!((20 * 3600..26 * 3600).contains(&total), "{total}");
        assert_eq!(retry_after(MAX_ATTEMPTS, base), None);
    }

    #[test]
    fn signatures_match_their_specifications() {
        // HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog") (RFC 4231 style
        // well-known vector).
        assert_eq!(
            svc_signature("key", b"The quick brown fox jumps over the lazy dog"),
            "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
        );
        // The Standard Webhooks reference example.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            standard_signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn only_public_addresses_are_reachable() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::",
            "198.18.0.1",
            "240.0.0.1",
            // The forms a hostile tester found accepted.
            "::127.0.0.1",
            "fec0::1",
            "192.88.99.1",
            "2002:7f00:1::",
            // Embedded forms of private addresses, and the other special blocks.
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "2002:c0a8:101::1",
            "2001::1",
            "2001:db8::1",
            "3fff::1",
            "100::1",
            "5f00::1",
            "ff02::1",
            "192.0.0.9",
            "192.0.2.1",
            "198.51.100.1",
            "203.0.113.1",
            "10.1.2.3",
        ] {
            let ip: IpAddr = private.parse().unwrap_or(IpAddr::from([127, 0, 0, 1]));
            assert!(!is_public(ip), "{private}");
        }
        for public in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2a00:1450:4001::1",
            "192.88.100.1",
            "100.128.0.1",
            "172.32.0.1",
        ] {
            let ip: IpAddr = public.parse().unwrap_or(IpAddr::from([127, 0, 0, 1]));
            assert!(is_public(ip), "{public}");
        }
    }
}
