//! The routes of one area: accounts, sign-in, sessions and personal access tokens.

use super::*;
use crate::services::accounts::{Account, PersonalToken, Session, StepUpProof, TotpEnrollment};

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        post("/api/auth/register", "register", Access::Public, signin::register)
            .doc("Register an account with an e-mail and a password (8 to 128 characters, hashed with argon2id); a verification link goes to the address (audit user.register). An address taken by a live account: 409")
            .body_of::<signin::Register>()
            .answers::<Account>(201),
        post("/api/auth/verify-email", "verifyEmail", Access::Public, signin::verify_email)
            .doc("Verify the account's e-mail with the link's token (once, within EMAIL_VERIFICATION_TTL_HOURS; audit user.email.verified); a token that is not good: 401")
            .body_of::<signin::VerifyEmail>()
            .answers::<Account>(200),
        get("/api/auth/sso/start", "startSingleSignOn", Access::Public, sso::start)
            .doc("Start a sign-in through an organization's identity provider (`org`: its name; or `email`: routed by the address's verified domain): a 302 to the provider (authorization code flow, PKCE S256, a single-use `state` bound to this browser by a ten-minute cookie, a `nonce`). No enabled configuration, an unknown organization or an unverified domain: 404")
            .query_of::<sso::StartQuery>()
            .redirects(),
        get("/api/auth/sso/callback", "singleSignOnCallback", Access::Public, sso::callback)
            .doc("Where the identity provider sends the browser back: the ID token checked (signature by the provider's key set, iss, aud, azp, exp/iat with 60 s of skew, nonce; none and HS* refused), then a session. Refusals are 401 with a stable code (SSO_STATE_INVALID, SSO_PROVIDER_ERROR, SSO_TOKEN_INVALID, SSO_ISSUER_MISMATCH, SSO_AUDIENCE_MISMATCH, SSO_TOKEN_EXPIRED, SSO_NONCE_MISMATCH, SSO_EMAIL_NOT_VERIFIED, SSO_DOMAIN_OF_ANOTHER_ORGANIZATION, SSO_DOMAIN_NOT_VERIFIED, SSO_PROVISIONING_OFF, SSO_CONFIGURATION_DISABLED; SSO_LINK_REQUIRED with `details.linkToken` when an account has the e-mail), audited as user.login.failed, and create nothing")
            .query_of::<sso::CallbackQuery>()
            .answers::<Session>(200),
        post("/api/auth/sso/link", "linkSingleSignOn", Access::Public, sso::link)
            .doc("Link an identity to the account with its e-mail: the `linkToken` of the callback's SSO_LINK_REQUIRED and the account's password (throttled as a sign-in; ten minutes, once); then a session")
            .body_of::<sso::LinkAccount>()
            .answers::<Session>(200),
        post("/api/auth/login", "login", Access::Public, signin::login)
            .doc("Sign in: an access token (JWT_EXPIRES_IN, or JWT_EXPIRES_IN_<TIER> by the tier of `orgId`, at most 24 h) and a refresh token (audit user.login). A wrong password and an unknown account answer the same 401 INVALID_CREDENTIALS in the same time (audit user.login.failed); repeated failures for the account or the client address are slowed, then refused with 429 TOO_MANY_ATTEMPTS and Retry-After; an unverified e-mail, when EMAIL_VERIFICATION_REQUIRED, is 403 EMAIL_NOT_VERIFIED")
            .body_of::<signin::Login>()
            .answers::<Session>(200),
        post("/api/auth/refresh", "refresh", Access::Public, signin::refresh)
            .doc("A new token pair for a refresh token, which is used up (rotation). A token used before, beyond a 10-second grace window, ends its whole session (reuse detection); within it, the later request loses with 401 and nothing ends")
            .body_of::<signin::RefreshToken>()
            .answers::<Session>(200),
        post("/api/auth/logout", "logout", Access::Public, signin::logout)
            .doc("End the session of a refresh token: its refresh tokens and the access tokens issued in it stop working at once, on every replica (audit user.logout). An unknown token ends nothing and is not an error")
            .body_of::<signin::RefreshToken>()
            .answers::<signin::SignedOut>(200),
        post("/api/auth/step-up", "stepUp", Access::User, signin::step_up)
            .doc("Re-enter the password, or a code of the enrolled authenticator (`totp`, each code good once), for a step-up proof, sent as X-Step-Up-Token to the operations that require it, valid for STEP_UP_WINDOW_SECONDS and bound to the session it was made in (logout, revoke-all and a password change end it). A wrong one: 401 INVALID_CREDENTIALS, counted as a failed sign-in; a code without an authenticator: 400. Not with a personal access token")
            .body_of::<signin::StepUp>()
            .answers::<StepUpProof>(200),
        get("/api/me", "me", Access::User, signin::me)
            .doc("The caller's account (404 for a user who signs in elsewhere), with the features it has in the organization it acts in (`x-org-id`, else its active organization): the tier's and bundles', less those a flag of the user's own took away, and the preview features opened for it")
            .answers::<crate::services::accounts::Me>(200),
        put("/api/me/active-organization", "switchOrganization", Access::User, signin::switch_organization)
            .doc("Record the organization the caller acts in by default (it must stand in it; else 403 TENANT_FORBIDDEN): access tokens minted afterwards (sign-in, refresh, the console's) carry it, and a request without `x-org-id` acts in it; `x-org-id` still wins for one request (audit org.switch)")
            .body_of::<signin::ActiveOrganization>()
            .answers::<signin::ActiveOrganization>(200),
        put("/api/me", "updateMe", Access::User, signin::update_me)
            .doc("Change the caller's name or e-mail (a new e-mail is unverified, and a link goes to it; audit user.profile.update)")
            .body_of::<signin::UpdateMe>()
            .answers::<Account>(200),
        delete("/api/me", "deleteMe", Access::User, signin::delete_me)
            .doc("Delete the caller's account, with a fresh X-Step-Up-Token: it can no longer sign in, its sessions and tokens end; its audit history stays (audit user.delete)")
            .answers::<Deleted>(200),
        put("/api/me/password", "changePassword", Access::User, signin::change_password)
            .doc("Change the password (the current one is checked): every session ends (audit user.password.change); the answer is the caller's new session")
            .body_of::<signin::ChangePassword>()
            .answers::<Session>(200),
        post("/api/me/totp", "enrollTotp", Access::User, signin::enroll_totp)
            .doc("Start enrolling (or replacing) an authenticator app, with a fresh X-Step-Up-Token (the password again, or a code of the authenticator enrolled): a new secret (base32, and the otpauth:// URI to scan), waiting for its first code; sealed at rest with SECRETS_ENCRYPTION_KEY when set")
            .answers::<TotpEnrollment>(201),
        post("/api/me/totp/confirm", "confirmTotp", Access::User, signin::confirm_totp)
            .doc("Confirm the waiting authenticator with its current code, with a fresh X-Step-Up-Token (audit user.profile.update; the account is mailed that an authenticator was added or replaced): step-up then takes its codes. A wrong code: 400; none waiting: 409")
            .body_of::<signin::TotpCode>()
            .answers::<Account>(200),
        delete("/api/me/totp", "removeTotp", Access::User, signin::remove_totp)
            .doc("Remove the authenticator, with a fresh X-Step-Up-Token (audit user.profile.update)")
            .answers::<Account>(200),
        get("/api/me/tokens", "listTokens", Access::User, signin::tokens)
            .doc("The caller's personal access tokens, newest first, with their last use; never their secrets")
            .answers::<signin::Tokens>(200),
        post("/api/me/tokens", "createToken", Access::User, signin::create_token)
            .doc("Create a personal access token (`cpat_` and a checksum a secret scanner recognises; stored hashed): a name, a required expiry at most a year ahead, optionally one organization and a subset of the caller's permissions there (more than the caller holds: 403 PERMISSION_ESCALATION). Its secret is in this answer only (audit user.token.create)")
            .body_of::<signin::CreateToken>()
            .answers::<PersonalToken>(201),
        delete("/api/me/tokens/{id}", "revokeToken", Access::User, signin::revoke_token)
            .doc("Revoke one of the caller's personal access tokens: it stops working at once, on every replica")
            .answers::<Deleted>(200),
        post("/api/me/tokens/revoke-all", "revokeAllTokens", Access::User, signin::revoke_all)
            .doc("End every session and personal access token of the caller, this one included: every access token issued before fails at once, on every replica (audit user.tokens.revoke-all)")
            .answers::<signin::Revoked>(200),
    ]
}
