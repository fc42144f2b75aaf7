//! Caches that follow changes on every replica: on PostgreSQL each process listens
//! on three channels. [`CACHE_CHANNEL`]: it drops the rule sets another replica's
//! change made stale. [`FACTS_CHANNEL`] (sent by triggers inside every change of
//! organizations, memberships, Roles, the super-admin flag, notification
//! preferences and exemptions): the kept facts are not used any more. [`KEYS_CHANNEL`]:
//! a key configuration or a data key changed, the unwrapped data keys are dropped. [`QUOTA_CHANNEL`]: an account's limits changed
//! (its unspent units go back to the pool) or its usage was reset (they are
//! forgotten). After a lost connection (notifications may have been missed) it
//! drops every rule set and fact. With several database hosts it listens on the
//! primary's and reconnects when the pool moves to a new one. The caches' TTLs stay
//! as a safety net.

use std::time::Duration;

use sqlx::postgres::PgListener;

use super::Shutdown;
use crate::compliance::RuleCache;
use crate::compliance::{Stale, CACHE_CHANNEL};
use crate::keys::Keyring;
use crate::replica::allowance;
use crate::services::context::AppState;
use crate::storage::Store;
use crate::storage::{FACTS_CHANNEL, KEYS_CHANNEL, QUOTA_CHANNEL};

/// The worker, for a PostgreSQL `url`.
pub async fn run(url: String, state: AppState, mut shutdown: Shutdown) {
    let mut moves = state.infra.store.primary_moves();
    loop {
        if let Some(moves) = moves.as_mut() {
            moves.mark_unchanged();
        }
        match PgListener::connect(&state.infra.store.session_url(&url)).await {
            Ok(mut listener) => {
                if let Err(error) = listener
                    .listen_all([CACHE_CHANNEL, FACTS_CHANNEL, QUOTA_CHANNEL, KEYS_CHANNEL])
                    .await
                {
                    tracing::warn!(%error, "cache sync: cannot listen");
                } else {
                    // Whatever changed while nobody listened is unknown.
                    forget_everything(
                        &state.infra.store,
                        &state.replica.rule_cache,
                        &state.outbound.keyring,
                    );
                    loop {
                        tokio::select! {
                            _ = shutdown.wait() => return,
                            // The pool moved to a new primary: listen there.
                            _ = moved(&mut moves) => {
                                forget_everything(&state.infra.store, &state.replica.rule_cache, &state.outbound.keyring);
                                break;
                            }
                            received = listener.try_recv() => match received {
                                Ok(Some(notification)) => {
                                    heard(&state, notification.channel(), notification.payload());
                                }
                                // The connection dropped; the listener reconnects on the
                                // next call, and what was missed is unknown.
                                Ok(None) => forget_everything(&state.infra.store, &state.replica.rule_cache, &state.outbound.keyring),
                                Err(error) => {
                                    tracing::warn!(%error, "cache sync: listener failed");
                                    forget_everything(&state.infra.store, &state.replica.rule_cache, &state.outbound.keyring);
                                    break;
                                }
                            },
                        }
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "cache sync: cannot connect"),
        }
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Resolves when the pool moves to a new primary (never with one host).
async fn moved(moves: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    if let Some(moves) = moves {
        if moves.changed().await.is_ok() {
            return;
        }
    }
    std::future::pending().await
}

fn forget_everything(store: &Store, rule_cache: &RuleCache, keyring: &Keyring) {
    rule_cache.invalidate_all();
    store.facts_changed();
    keyring.changed();
}

fn heard(state: &AppState, channel: &str, payload: &str) {
    if channel == FACTS_CHANNEL {
        state.infra.store.facts_changed();
    } else if channel == KEYS_CHANNEL {
        state.outbound.keyring.forget(payload);
    } else if channel == QUOTA_CHANNEL {
        // Giving back writes: off the listener's loop.
        let (state, payload) = (state.clone(), payload.to_owned());
        tokio::spawn(async move {
            allowance::heard(&state.infra.store, &state.replica.allowances, &payload).await;
        });
    } else {
        state
            .replica
            .rule_cache
            .forget(&Stale::from_payload(payload));
    }
}
