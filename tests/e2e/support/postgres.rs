//! The gateway's PostgreSQL in the end-to-end tests: the host's test
//! cluster (`scripts/postgres.sh`), reached from the containers through the
//! Docker host gateway. Each stack gets its own schema, so stacks running
//! at once never see each other's conversations.

use sqlx::{Connection, PgConnection};

/// The name containers use for the Docker host (mapped to `host-gateway`).
pub const HOST_ALIAS: &str = "host.docker.internal";

/// One schema of the test cluster.
#[derive(Debug)]
pub struct Schema {
    /// As the host reaches it.
    host_url: String,
    /// The schema's name.
    pub name: String,
}

/// `url` with its host replaced by `host` (`postgres://user:pw@HOST:port/db`).
fn with_host(url: &str, host: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (credentials, location) = match rest.rsplit_once('@') {
        Some((credentials, location)) => (Some(credentials), location),
        None => (None, rest),
    };
    let host_end = location.find([':', '/', '?']).unwrap_or(location.len());
    let rewritten = format!("{host}{}", &location[host_end..]);
    match credentials {
        Some(credentials) => format!("{scheme}://{credentials}@{rewritten}"),
        None => format!("{scheme}://{rewritten}"),
    }
}

fn with_search_path(url: &str, schema: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

impl Schema {
    /// Creates a fresh schema in the cluster at `host_url`.
    pub async fn create(host_url: &str) -> Self {
        let name = format!("e2e_{}", uuid::Uuid::new_v4().simple());
        let mut connection = PgConnection::connect(host_url)
            .await
            .unwrap_or_else(|error| {
                panic!(
                    "cannot connect to PARLEY_TEST_POSTGRES_URL ({error}); run scripts/postgres.sh"
                )
            });
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
            .execute(&mut connection)
            .await
            .expect("create the test schema");
        let _ = connection.close().await;
        Self {
            host_url: host_url.to_owned(),
            name,
        }
    }

    /// The URL a container uses: the Docker host instead of loopback, and
    /// this schema as the search path.
    pub fn container_url(&self) -> String {
        let url = std::env::var("PARLEY_E2E_POSTGRES_URL")
            .ok()
            .filter(|url| !url.is_empty())
            .unwrap_or_else(|| with_host(&self.host_url, HOST_ALIAS));
        with_search_path(&url, &self.name)
    }

    /// Drops the schema (best effort: the cluster is a throwaway one).
    pub async fn drop_schema(&self) {
        if let Ok(mut connection) = PgConnection::connect(&self.host_url).await {
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP SCHEMA IF EXISTS {} CASCADE",
                self.name
            )))
            .execute(&mut connection)
            .await;
            let _ = connection.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_replaced_and_the_rest_kept() {
        assert_eq!(
            with_host("postgres://parley:parley@127.0.0.1:55432/parley", "h"),
            "postgres://parley:parley@h:55432/parley"
        );
        assert_eq!(
            with_host("postgres://localhost/db?sslmode=disable", "h"),
            "postgres://h/db?sslmode=disable"
        );
        assert_eq!(
            with_search_path("postgres://h/db", "s"),
            "postgres://h/db?options=-c%20search_path%3Ds"
        );
    }
}
