//! The HTTP layer: handlers parse and authorize, then call a service function (or,
//! where no service exists yet, storage), and shape the answer. No SQL here.

mod admin;
mod ai_settings;
mod announcements;
pub mod audit;
mod billing;
mod builds;
mod catalog;
mod check_log;
mod conversations;
pub mod error;
mod exemptions;
mod exports;
pub mod extract;
mod gate;
mod generation;
pub(crate) mod guard;
mod images;
mod invitations;
mod keys;
pub mod listener;
mod members;
mod messages;
pub mod openapi;
mod organizations;
mod pipelines;
mod plugins;
mod policies;
mod preferences;
mod quotas;
mod reports;
pub mod response;
pub mod router;
pub mod routes;
mod rules;
mod scans;
mod schemas;
pub(crate) mod signin;
pub(crate) mod sso;
pub mod state;
pub mod system;
mod templates;
pub mod text;
pub(crate) mod validate;

pub use router::router;
pub use state::AppState;
