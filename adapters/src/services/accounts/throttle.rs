//! The sign-in throttle: an attempt is charged before it is judged, refused while
//! its keys are locked, slowed as their failures say, and given back when it
//! succeeds (the policy is `tenancy::ThrottlePolicy`).

use super::*;
use crate::storage::Store;

/// Refuses an attempt that the recorded failures lock out, and waits as long as
/// they slow it.
/// Charges one attempt against the throttle's `keys` before it is judged (so that
/// concurrent guesses each count the others in flight: at most the policy's number
/// is ever judged per run), then waits the policy's delay. Refused (429) while a key
/// is locked, with nothing charged. An attempt that succeeds is given back
/// ([`refund`]); one that fails stays counted ([`record_failure`]).
pub(crate) async fn throttle(
    store: &Store,
    keys: &[&str],
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let policy = ThrottlePolicy::default();
    let window = (
        policy.forgotten_since(now),
        policy.lock_after,
        now - policy.lockout,
    );
    let charged = unit_of_work!(store, |tx| {
        let charged = tx.charge_signin_attempt(keys, window, now).await?;
        if charged.is_none() {
            // Throttled: nothing of this attempt is counted.
            tx.abandon();
        }
        Ok(charged)
    })?;
    let Some(charged) = charged else {
        let mut until = now + policy.lockout;
        for (_, failures) in store.signin_failures(keys).await? {
            if let Throttle::Locked(locked) = policy.judge(Some(&failures), now) {
                until = locked;
            }
        }
        let retry_after = u64::try_from((until - now).num_seconds())
            .unwrap_or(0)
            .max(1);
        return Err(SignInRefusal::TooManyAttempts { retry_after }.into());
    };
    // The delay the failures before this attempt earned.
    let delay = charged
        .iter()
        .filter(|after| after.count > 1)
        .map(|after| {
            let before = tenancy::Failures {
                count: after.count - 1,
                ..*after
            };
            match policy.judge(Some(&before), now) {
                Throttle::Slow(delay) => delay,
                Throttle::Open | Throttle::Locked(_) => Duration::ZERO,
            }
        })
        .max()
        .unwrap_or(Duration::ZERO);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    Ok(())
}

/// Gives back an attempt [`throttle`] charged, which succeeded.
pub(crate) async fn refund(store: &Store, keys: &[&str]) -> ServiceResult<()> {
    unit_of_work!(store, |tx| { Ok(tx.refund_signin_attempt(keys).await?) })
}

/// Records a failed attempt (charged already by [`throttle`]): its audit event.
pub(crate) async fn record_failure(
    store: &Store,
    event: audit_chain::AuditEvent,
) -> ServiceResult<()> {
    crate::services::audit::record(store, &[event]).await
}
