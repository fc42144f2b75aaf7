// The migrations are compiled into the binary (`sqlx::migrate!`): a new or changed
// migration file must rebuild the crate.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
