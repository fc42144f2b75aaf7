//! Single sign-on's decisions: which e-mail domains an organization may claim and how
//! a claim is proven, who a first sign-in through an identity provider becomes
//! (linked, provisioned or refused), which Roles an identity provider's groups
//! give, whether an organization that requires its single sign-on accepts a
//! credential, and the break-glass accounts' bounds. The caller passes the instant;
//! nothing here reads a clock, the network or a store.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// Identity-provider configurations a root organization may hold at most (the SSO
/// bundle's and Enterprise's "up to 5").
pub const MAX_IDENTITY_PROVIDERS: usize = 5;
/// Break-glass accounts an organization may arm at once.
pub const MAX_BREAK_GLASS: usize = 2;
/// How long a break-glass account stays armed at most, in days.
pub const MAX_BREAK_GLASS_DAYS: i64 = 30;
/// How long a sign-in started at the provider may take to come back, in seconds.
pub const ATTEMPT_LIFETIME_SECONDS: i64 = 600;
/// Clock skew tolerated on an ID token's `exp` and `iat`, in seconds.
pub const CLOCK_SKEW_SECONDS: i64 = 60;
/// Domains a configuration serves, and domains an organization may claim, at most.
pub const MAX_DOMAINS: usize = 20;
/// Group-to-Role mappings of a configuration, at most.
pub const MAX_ROLE_MAPPINGS: usize = 50;
/// Groups read from an ID token at most (more are ignored, never an error).
pub const MAX_GROUPS: usize = 200;
/// The name of the TXT record that proves a domain: `_compliance-challenge.<domain>`.
pub const TXT_RECORD_LABEL: &str = "_compliance-challenge";
/// The prefix of the TXT record's value: `compliance-domain-verification=<token>`.
pub const TXT_VALUE_PREFIX: &str = "compliance-domain-verification=";

/// Mail services whose addresses anyone can have: no organization may claim them.
const PUBLIC_MAIL_DOMAINS: [&str; 40] = [
    "gmail.com",
    "googlemail.com",
    "outlook.com",
    "hotmail.com",
    "hotmail.co.uk",
    "live.com",
    "msn.com",
    "yahoo.com",
    "yahoo.co.uk",
    "yahoo.fr",
    "ymail.com",
    "rocketmail.com",
    "aol.com",
    "icloud.com",
    "me.com",
    "mac.com",
    "proton.me",
    "protonmail.com",
    "pm.me",
    "gmx.com",
    "gmx.de",
    "gmx.net",
    "web.de",
    "mail.com",
    "mail.ru",
    "yandex.com",
    "yandex.ru",
    "zoho.com",
    "fastmail.com",
    "tutanota.com",
    "tuta.io",
    "hey.com",
    "qq.com",
    "163.com",
    "126.com",
    "naver.com",
    "orange.fr",
    "free.fr",
    "libero.it",
    "example.com",
];

/// Why a domain cannot be claimed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// Not a host name of at least two labels.
    #[error("must be a domain name such as example.org (letters, digits and hyphens, at least two labels)")]
    Malformed,
    /// A mail service anyone can use.
    #[error("`{0}` is a public mail domain: anyone can have an address there")]
    Public(String),
}

/// A domain as claimed: trimmed, lower-cased, without a trailing dot, checked (labels
/// of letters, digits and hyphens, 1 to 63 characters, not starting or ending with a
/// hyphen; at least two; at most 253 characters), never a public mail domain.
///
/// ```
/// use tenancy::sso::{claimable_domain, DomainError};
/// assert_eq!(claimable_domain(" Acme.Example.ORG. "), Ok("acme.example.org".to_owned()));
/// assert_eq!(claimable_domain("gmail.com"), Err(DomainError::Public("gmail.com".to_owned())));
/// assert_eq!(claimable_domain("localhost"), Err(DomainError::Malformed));
/// ```
pub fn claimable_domain(text: &str) -> Result<String, DomainError> {
    let domain = text.trim().trim_end_matches('.').to_ascii_lowercase();
    let labels: Vec<&str> = domain.split('.').collect();
    let well_formed = domain.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
        && labels
            .last()
            .is_some_and(|tld| tld.bytes().any(|b| b.is_ascii_lowercase()));
    if !well_formed {
        return Err(DomainError::Malformed);
    }
    if PUBLIC_MAIL_DOMAINS.contains(&domain.as_str()) {
        return Err(DomainError::Public(domain));
    }
    Ok(domain)
}

/// The domain of an e-mail address, lower-cased (`None` without exactly one `@`).
pub fn email_domain(email: &str) -> Option<String> {
    let (local, domain) = email.trim().rsplit_once('@')?;
    (!local.is_empty() && !local.contains('@') && !domain.is_empty())
        .then(|| domain.trim_end_matches('.').to_ascii_lowercase())
}

/// The TXT record's name for `domain`.
pub fn txt_record_name(domain: &str) -> String {
    format!("{TXT_RECORD_LABEL}.{domain}")
}

/// The TXT record's value that proves a claim made with `token`.
pub fn txt_record_value(token: &str) -> String {
    format!("{TXT_VALUE_PREFIX}{token}")
}

/// Whether one of the TXT records found (each the concatenation of its strings)
/// proves the claim made with `token` (surrounding spaces and quotes ignored).
pub fn txt_proves<'a>(records: impl IntoIterator<Item = &'a str>, token: &str) -> bool {
    let expected = txt_record_value(token);
    records
        .into_iter()
        .any(|record| record.trim().trim_matches('"').trim() == expected)
}

/// A group of the identity provider given a Role of the organization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleMapping {
    /// The group, as the groups claim spells it (compared exactly).
    pub group: String,
    /// The name of a Role of the organization (built-in or custom; never Owner).
    pub role: String,
}

/// The Roles a person signing in is given: those every group they are in maps to
/// (duplicates once), or the default Role when none of their groups is mapped.
/// Never more than the mappings say: the caller sets exactly these.
///
/// ```
/// use tenancy::sso::{mapped_roles, RoleMapping};
/// let mappings = vec![
///     RoleMapping { group: "platform".into(), role: "Admin".into() },
///     RoleMapping { group: "auditors".into(), role: "Compliance Viewer".into() },
/// ];
/// let roles = mapped_roles(&mappings, &["auditors".into()], "Member");
/// assert_eq!(roles.into_iter().collect::<Vec<_>>(), ["Compliance Viewer"]);
/// let roles = mapped_roles(&mappings, &["sales".into()], "Member");
/// assert_eq!(roles.into_iter().collect::<Vec<_>>(), ["Member"]);
/// ```
pub fn mapped_roles<'a>(
    mappings: &'a [RoleMapping],
    groups: &[String],
    default_role: &'a str,
) -> BTreeSet<&'a str> {
    let groups: BTreeSet<&str> = groups.iter().take(MAX_GROUPS).map(String::as_str).collect();
    let mapped: BTreeSet<&str> = mappings
        .iter()
        .filter(|m| groups.contains(m.group.as_str()))
        .map(|m| m.role.as_str())
        .collect();
    if mapped.is_empty() {
        BTreeSet::from([default_role])
    } else {
        mapped
    }
}

/// Where an e-mail's domain stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DomainStanding {
    /// Verified by the organization signing the person in, and served by the
    /// configuration they came through.
    VerifiedHere,
    /// Verified by another organization.
    VerifiedElsewhere,
    /// Verified by nobody, or by this organization but not served by the
    /// configuration.
    Unverified,
}

/// What is known of a person arriving through an identity provider for the first
/// time (no identity of theirs is linked yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// The provider says the e-mail is verified (`email_verified: true`).
    pub email_verified: bool,
    /// Where the e-mail's domain stands.
    pub domain: DomainStanding,
    /// A live account has that e-mail.
    pub account_exists: bool,
    /// The configuration provisions accounts just in time.
    pub provisioning: bool,
}

/// Why the callback of a sign-in through an identity provider is refused: each a
/// 401 with a stable code, audited as user.login.failed with [`Refusal::reason`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The `state` is unknown, expired, used already, or not this browser's.
    StateInvalid,
    /// The provider answered an error, or the code exchange failed.
    ProviderError,
    /// The ID token's signature, algorithm or form is not acceptable.
    TokenInvalid,
    /// The ID token's `iss` is not the configuration's issuer.
    IssuerMismatch,
    /// The ID token's `aud` (or `azp`) is not the configuration's client.
    AudienceMismatch,
    /// The ID token expired, or was issued in the future.
    TokenExpired,
    /// The ID token's `nonce` is not the one this sign-in sent.
    NonceMismatch,
    /// The provider does not say the e-mail is verified.
    EmailNotVerified,
    /// The e-mail's domain is verified by another organization.
    DomainOfAnotherOrganization,
    /// The e-mail's domain is not verified by this organization (nothing keyed on
    /// e-mail happens for it).
    DomainNotVerified,
    /// No account is linked and the configuration does not provision.
    ProvisioningOff,
    /// An account has this e-mail: its owner links it by signing in with its
    /// password once.
    LinkRequired,
    /// The configuration is disabled (or the `sso` feature is not active).
    ConfigurationDisabled,
}

impl Refusal {
    /// Every refusal.
    pub const ALL: [Refusal; 13] = [
        Refusal::StateInvalid,
        Refusal::ProviderError,
        Refusal::TokenInvalid,
        Refusal::IssuerMismatch,
        Refusal::AudienceMismatch,
        Refusal::TokenExpired,
        Refusal::NonceMismatch,
        Refusal::EmailNotVerified,
        Refusal::DomainOfAnotherOrganization,
        Refusal::DomainNotVerified,
        Refusal::ProvisioningOff,
        Refusal::LinkRequired,
        Refusal::ConfigurationDisabled,
    ];

    /// The stable error code.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::StateInvalid => "SSO_STATE_INVALID",
            Refusal::ProviderError => "SSO_PROVIDER_ERROR",
            Refusal::TokenInvalid => "SSO_TOKEN_INVALID",
            Refusal::IssuerMismatch => "SSO_ISSUER_MISMATCH",
            Refusal::AudienceMismatch => "SSO_AUDIENCE_MISMATCH",
            Refusal::TokenExpired => "SSO_TOKEN_EXPIRED",
            Refusal::NonceMismatch => "SSO_NONCE_MISMATCH",
            Refusal::EmailNotVerified => "SSO_EMAIL_NOT_VERIFIED",
            Refusal::DomainOfAnotherOrganization => "SSO_DOMAIN_OF_ANOTHER_ORGANIZATION",
            Refusal::DomainNotVerified => "SSO_DOMAIN_NOT_VERIFIED",
            Refusal::ProvisioningOff => "SSO_PROVISIONING_OFF",
            Refusal::LinkRequired => "SSO_LINK_REQUIRED",
            Refusal::ConfigurationDisabled => "SSO_CONFIGURATION_DISABLED",
        }
    }

    /// The reason recorded with user.login.failed.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::StateInvalid => "sso state invalid",
            Refusal::ProviderError => "sso provider error",
            Refusal::TokenInvalid => "sso id token invalid",
            Refusal::IssuerMismatch => "sso issuer mismatch",
            Refusal::AudienceMismatch => "sso audience mismatch",
            Refusal::TokenExpired => "sso id token expired",
            Refusal::NonceMismatch => "sso nonce mismatch",
            Refusal::EmailNotVerified => "sso e-mail not verified",
            Refusal::DomainOfAnotherOrganization => "sso domain of another organization",
            Refusal::DomainNotVerified => "sso domain not verified",
            Refusal::ProvisioningOff => "sso provisioning off",
            Refusal::LinkRequired => "sso link requires the account's password",
            Refusal::ConfigurationDisabled => "sso configuration disabled",
        }
    }

    /// What the person is told.
    pub fn message(self) -> &'static str {
        match self {
            Refusal::StateInvalid => "the sign-in expired, was used already, or was started in another browser: start again",
            Refusal::ProviderError => "the identity provider refused the sign-in or could not be reached",
            Refusal::TokenInvalid => "the identity provider's ID token is not valid",
            Refusal::IssuerMismatch => "the ID token was not issued by the configured identity provider",
            Refusal::AudienceMismatch => "the ID token was not issued to this platform",
            Refusal::TokenExpired => "the ID token has expired",
            Refusal::NonceMismatch => "the ID token does not belong to this sign-in",
            Refusal::EmailNotVerified => "the identity provider does not say the e-mail is verified",
            Refusal::DomainOfAnotherOrganization => "the e-mail's domain belongs to another organization",
            Refusal::DomainNotVerified => "the e-mail's domain is not verified by this organization",
            Refusal::ProvisioningOff => "no account is linked to this identity and the organization does not create accounts on sign-in",
            Refusal::LinkRequired => "an account has this e-mail: sign in with its password once to link it (POST /api/auth/sso/link with the linkToken)",
            Refusal::ConfigurationDisabled => "single sign-on through this identity provider is disabled",
        }
    }
}

/// What a first sign-in through an identity provider does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstSignIn {
    /// The account with the e-mail is linked once its owner signs in with its
    /// password (no silent takeover).
    LinkAfterPassword,
    /// An account and a membership with the default Role are created.
    Provision,
    /// Nothing is created.
    Refused(Refusal),
}

/// Decides a first sign-in: nothing keyed on the e-mail (linking, provisioning)
/// happens unless the provider verified it and the domain is verified by this
/// organization for this configuration.
///
/// ```
/// use tenancy::sso::{first_sign_in, Arrival, DomainStanding, FirstSignIn, Refusal};
/// let arrival = Arrival { email_verified: true, domain: DomainStanding::VerifiedHere,
///                         account_exists: false, provisioning: true };
/// assert_eq!(first_sign_in(&arrival), FirstSignIn::Provision);
/// let taken = Arrival { account_exists: true, ..arrival };
/// assert_eq!(first_sign_in(&taken), FirstSignIn::LinkAfterPassword);
/// let unverified = Arrival { email_verified: false, ..arrival };
/// assert_eq!(first_sign_in(&unverified), FirstSignIn::Refused(Refusal::EmailNotVerified));
/// ```
pub fn first_sign_in(arrival: &Arrival) -> FirstSignIn {
    if arrival.domain == DomainStanding::VerifiedElsewhere {
        return FirstSignIn::Refused(Refusal::DomainOfAnotherOrganization);
    }
    if !arrival.email_verified {
        return FirstSignIn::Refused(Refusal::EmailNotVerified);
    }
    if arrival.domain != DomainStanding::VerifiedHere {
        return FirstSignIn::Refused(Refusal::DomainNotVerified);
    }
    if arrival.account_exists {
        return FirstSignIn::LinkAfterPassword;
    }
    if arrival.provisioning {
        FirstSignIn::Provision
    } else {
        FirstSignIn::Refused(Refusal::ProvisioningOff)
    }
}

/// Whether an organization requires its single sign-on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforcement {
    /// Password sessions and tokens are accepted.
    Off,
    /// Required from an instant on (the end of the grace period, or when it was set).
    Required {
        /// When enforcement starts.
        from: DateTime<Utc>,
    },
}

/// A person's credential, as enforcement sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credential<'a> {
    /// The root organization whose single sign-on issued the session (or the session
    /// a personal access token was created in), if any.
    pub sso_org: Option<&'a str>,
    /// Until when the person is an armed break-glass account of the organization.
    pub break_glass_until: Option<DateTime<Utc>>,
}

/// Whether `credential` is refused in (a team of) root organization `root_id`
/// because the organization requires its single sign-on (403 `SSO_REQUIRED`). A
/// service token is never a person's credential and is never asked.
///
/// ```
/// use chrono::{TimeZone, Utc, Duration};
/// use tenancy::sso::{sso_refuses, Credential, Enforcement};
/// let now = Utc.with_ymd_and_hms(2026, 11, 28, 12, 0, 0).unwrap();
/// let required = Enforcement::Required { from: now - Duration::hours(1) };
/// let password = Credential { sso_org: None, break_glass_until: None };
/// assert!(sso_refuses(required, "acme", password, now));
/// assert!(!sso_refuses(required, "acme", Credential { sso_org: Some("acme"), ..password }, now));
/// assert!(sso_refuses(required, "acme", Credential { sso_org: Some("globex"), ..password }, now));
/// let armed = Credential { break_glass_until: Some(now + Duration::days(1)), ..password };
/// assert!(!sso_refuses(required, "acme", armed, now));
/// assert!(!sso_refuses(Enforcement::Required { from: now + Duration::days(7) }, "acme", password, now));
/// ```
pub fn sso_refuses(
    enforcement: Enforcement,
    root_id: &str,
    credential: Credential<'_>,
    now: DateTime<Utc>,
) -> bool {
    match enforcement {
        Enforcement::Off => false,
        Enforcement::Required { from } => {
            now >= from
                && credential.sso_org != Some(root_id)
                && credential
                    .break_glass_until
                    .is_none_or(|until| until <= now)
        }
    }
}

/// Why a break-glass account cannot be armed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BreakGlassError {
    /// Past the longest arming.
    #[error("a break-glass account is armed for at most {MAX_BREAK_GLASS_DAYS} days")]
    TooLong,
    /// Not in the future.
    #[error("`until` must be in the future")]
    InThePast,
    /// Two others are armed already.
    #[error("at most {MAX_BREAK_GLASS} break-glass accounts are armed at once")]
    TooMany,
}

/// Checks arming a break-glass account until `until`, when `others_armed` other
/// accounts of the organization are armed at `now`.
pub fn check_break_glass(
    others_armed: usize,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), BreakGlassError> {
    if until <= now {
        return Err(BreakGlassError::InThePast);
    }
    if until > now + Duration::days(MAX_BREAK_GLASS_DAYS) {
        return Err(BreakGlassError::TooLong);
    }
    if others_armed >= MAX_BREAK_GLASS {
        return Err(BreakGlassError::TooMany);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 28, 12, 0, 0)
            .single()
            .unwrap_or_default()
    }

    #[test]
    fn hostile_domains_are_refused() {
        for text in [
            "",
            ".",
            "com",
            "-acme.org",
            "acme-.org",
            "ac me.org",
            "acme..org",
            "acme.org/evil",
            "ACME.ORG@x",
            "xn--.org",
            "acme.123",
        ] {
            assert!(claimable_domain(text).is_err(), "{text:?}");
        }
        let long = format!("{}.org", "a".repeat(64));
        assert_eq!(claimable_domain(&long), Err(DomainError::Malformed));
        assert_eq!(
            claimable_domain("xn--bcher-kva.example"),
            Ok("xn--bcher-kva.example".into())
        );
    }

    #[test]
    fn the_txt_record_must_carry_the_token_exactly() {
        let token = "abc123";
        assert!(txt_proves(
            ["v=spf1 -all", "\"compliance-domain-verification=abc123\""],
            token
        ));
        assert!(!txt_proves(
            ["compliance-domain-verification=abc1234"],
            token
        ));
        assert!(!txt_proves(["compliance-domain-verification="], token));
        assert!(!txt_proves([], token));
        assert_eq!(
            txt_record_name("acme.org"),
            "_compliance-challenge.acme.org"
        );
    }

    #[test]
    fn mappings_never_grant_more_than_they_say() {
        let mappings = vec![
            RoleMapping {
                group: "eng".into(),
                role: "Compliance Editor".into(),
            },
            RoleMapping {
                group: "eng-leads".into(),
                role: "Admin".into(),
            },
            RoleMapping {
                group: "eng".into(),
                role: "Compliance Editor".into(),
            },
        ];
        let both = mapped_roles(&mappings, &["eng".into(), "eng-leads".into()], "Member");
        assert_eq!(
            both.into_iter().collect::<Vec<_>>(),
            ["Admin", "Compliance Editor"]
        );
        let none = mapped_roles(&mappings, &[], "Member");
        assert_eq!(none.into_iter().collect::<Vec<_>>(), ["Member"]);
        // A group's name is compared exactly.
        let case = mapped_roles(&mappings, &["ENG".into()], "Member");
        assert_eq!(case.into_iter().collect::<Vec<_>>(), ["Member"]);
    }

    #[test]
    fn a_first_sign_in_keys_nothing_on_an_unverified_domain() {
        let base = Arrival {
            email_verified: true,
            domain: DomainStanding::VerifiedHere,
            account_exists: false,
            provisioning: true,
        };
        let cases = [
            (base, FirstSignIn::Provision),
            (
                Arrival {
                    provisioning: false,
                    ..base
                },
                FirstSignIn::Refused(Refusal::ProvisioningOff),
            ),
            (
                Arrival {
                    account_exists: true,
                    ..base
                },
                FirstSignIn::LinkAfterPassword,
            ),
            (
                Arrival {
                    account_exists: true,
                    provisioning: false,
                    ..base
                },
                FirstSignIn::LinkAfterPassword,
            ),
            (
                Arrival {
                    domain: DomainStanding::Unverified,
                    ..base
                },
                FirstSignIn::Refused(Refusal::DomainNotVerified),
            ),
            (
                Arrival {
                    domain: DomainStanding::Unverified,
                    account_exists: true,
                    ..base
                },
                FirstSignIn::Refused(Refusal::DomainNotVerified),
            ),
            (
                Arrival {
                    domain: DomainStanding::VerifiedElsewhere,
                    ..base
                },
                FirstSignIn::Refused(Refusal::DomainOfAnotherOrganization),
            ),
            (
                Arrival {
                    email_verified: false,
                    account_exists: true,
                    ..base
                },
                FirstSignIn::Refused(Refusal::EmailNotVerified),
            ),
        ];
        for (arrival, expected) in cases {
            assert_eq!(first_sign_in(&arrival), expected, "{arrival:?}");
        }
    }

    #[test]
    fn enforcement_waits_for_its_grace_and_spares_armed_break_glass() {
        let now = now();
        let password = Credential {
            sso_org: None,
            break_glass_until: None,
        };
        assert!(!sso_refuses(Enforcement::Off, "acme", password, now));
        let required = Enforcement::Required { from: now };
        assert!(sso_refuses(required, "acme", password, now));
        let expired = Credential {
            break_glass_until: Some(now),
            ..password
        };
        assert!(
            sso_refuses(required, "acme", expired, now),
            "disarmed at its instant"
        );
    }

    #[test]
    fn break_glass_is_bounded() {
        let now = now();
        assert_eq!(check_break_glass(0, now + Duration::days(30), now), Ok(()));
        assert_eq!(
            check_break_glass(0, now + Duration::days(30) + Duration::seconds(1), now),
            Err(BreakGlassError::TooLong)
        );
        assert_eq!(
            check_break_glass(0, now, now),
            Err(BreakGlassError::InThePast)
        );
        assert_eq!(
            check_break_glass(2, now + Duration::days(1), now),
            Err(BreakGlassError::TooMany)
        );
    }

    #[test]
    fn every_refusal_has_its_own_code() {
        let all = Refusal::ALL;
        let codes: BTreeSet<&str> = all.iter().map(|r| r.code()).collect();
        assert_eq!(codes.len(), all.len());
        assert!(codes.iter().all(|c| c.starts_with("SSO_")));
    }
}
