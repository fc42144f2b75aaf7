//! What one process keeps between requests: facts kept until they change, its
//! blocks of monthly units, the message feed of its live streams, the writers that
//! group work. Below the services (which use it through `AppState`): nothing here
//! imports a service.

pub mod allowance;
pub mod feed;
pub mod grouped;
pub mod kept;
