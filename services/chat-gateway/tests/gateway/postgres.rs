//! A fresh schema on the test PostgreSQL (`PARLEY_TEST_POSTGRES_URL`, which
//! `scripts/postgres.sh` starts and prints), so that tests sharing one
//! database never see each other's rows.
//!
//! One implementation for the package: this suite declares it as a module
//! and the library's unit tests include the file by path
//! (`src/store/tests.rs`).

/// The URL of a new schema and its name, or `None` (with the loud line of
/// [`parley_testkit::not_run`]) when no PostgreSQL is configured
/// outside CI.
pub async fn fresh_schema(test: &str) -> Option<(String, String)> {
    let Ok(base) = std::env::var("PARLEY_TEST_POSTGRES_URL") else {
        parley_testkit::not_run(
            test,
            "PARLEY_TEST_POSTGRES_URL is not set: export PARLEY_TEST_POSTGRES_URL=\"$(scripts/postgres.sh)\"",
        );
        return None;
    };
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    admin(&format!("CREATE SCHEMA {schema}")).await;
    let separator = if base.contains('?') { '&' } else { '?' };
    Some((
        format!("{base}{separator}options=-c%20search_path%3D{schema}"),
        schema,
    ))
}

/// Drops a schema made by [`fresh_schema`].
pub async fn drop_schema(schema: &str) {
    admin(&format!("DROP SCHEMA {schema} CASCADE")).await;
}

async fn admin(statement: &str) {
    let Ok(base) = std::env::var("PARLEY_TEST_POSTGRES_URL") else {
        return;
    };
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&base)
        .await
        .expect("connect to PARLEY_TEST_POSTGRES_URL");
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(&pool)
        .await
        .unwrap_or_else(|error| panic!("{statement}: {error}"));
    pool.close().await;
}

/// A connection to PARLEY_TEST_POSTGRES_URL whose tables are those of
/// `schema` (made by [`fresh_schema`]), to look at what the gateways
/// stored.
#[allow(dead_code)] // The store's tests include this file too.
pub async fn connect(schema: &str) -> sqlx::AnyConnection {
    use sqlx::Connection;
    let base = std::env::var("PARLEY_TEST_POSTGRES_URL").expect("PARLEY_TEST_POSTGRES_URL");
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&base)
        .await
        .expect("connect to PARLEY_TEST_POSTGRES_URL");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SET search_path TO {schema}")))
        .execute(&mut conn)
        .await
        .expect("search_path");
    conn
}
