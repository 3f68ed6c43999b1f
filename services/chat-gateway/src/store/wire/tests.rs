//! Tests of `store::wire`.

use super::Binds;

#[test]
fn placeholders_are_numbered_for_postgres_and_anonymous_for_sqlite() {
    assert_eq!(Binds::Numbered.rows(2, 2, 2), "($2, $3), ($4, $5)");
    assert_eq!(Binds::Anonymous.rows(2, 2, 2), "(?, ?), (?, ?)");
    assert_eq!(Binds::Numbered.rows(1, 3, 1), "($1, $2, $3)");
}
