use super::*;

#[test]
fn a_password_in_the_url_is_refused_without_repeating_it() {
    let err =
        PgStoreOptions::from_url("postgres://app:s3cret@db.internal:5433/rampart").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, OptionsError::PasswordInUrl { .. }), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
    assert!(text.contains("passwordEnv"), "{text}");
    assert!(text.contains("app:***@db.internal:5433/rampart"), "{text}");
}

#[test]
fn only_postgres_urls_are_stores() {
    let err = PgStoreOptions::from_url("mysql://root:pw@localhost/x").unwrap_err();
    assert!(matches!(err, OptionsError::NotPostgres { .. }));
    assert!(!err.to_string().contains("pw"), "{err}");
    assert!(is_postgres_url("postgresql://u@h/d"));
    assert!(!is_postgres_url("/var/lib/rampart/sessions"));
}

#[test]
fn the_name_says_where_the_store_is_and_never_the_password() {
    let options = PgStoreOptions::from_url("postgres://app@db.internal:5433/rampart")
        .unwrap()
        .password_from_env("PATH")
        .unwrap();
    assert_eq!(
        options.name(),
        Path::new("postgres://app@db.internal:5433/rampart")
    );
    // The password is in the connection settings, and nowhere it could be printed.
    let path = std::env::var_os("PATH").unwrap();
    assert_eq!(options.config.get_password(), Some(path.as_encoded_bytes()));
    let debug = format!("{options:?}");
    assert!(!debug.contains(&*path.to_string_lossy()), "{debug}");
}

#[test]
fn an_unset_password_variable_is_named() {
    let err = PgStoreOptions::from_url("postgres://app@localhost/rampart")
        .unwrap()
        .password_from_env("RAMPART_TEST_SURELY_UNSET_PASSWORD")
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("`RAMPART_TEST_SURELY_UNSET_PASSWORD`"),
        "{err}"
    );
}

#[test]
fn pools_cannot_be_empty() {
    let options = PgStoreOptions::from_url("postgres://app@localhost/rampart").unwrap();
    assert!(options.clone().with_pools(0, 4).is_err());
    assert!(options.clone().with_pools(4, 0).is_err());
    let sized = options.with_pools(3, 7).unwrap();
    assert_eq!((sized.pool_size, sized.lock_connections), (3, 7));
}
