//! The HTTP layer: handlers parse and authorize, then call a service function (or,
//! where no service exists yet, storage), and shape the answer. No SQL here.

mod admin;
pub mod audit;
mod catalog;
mod check_log;
mod exemptions;
pub mod extract;
mod gate;
mod invitations;
pub mod listener;
mod members;
mod organizations;
mod policies;
mod preferences;
pub mod response;
pub mod router;
mod rules;
pub mod state;
pub mod system;
mod templates;
mod validate;

pub use router::router;
pub use state::AppState;
