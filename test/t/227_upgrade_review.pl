# 227_upgrade_review.pl: defects found by the 1.4 review in the update
# 1.3 -> 1.4 (sql/bulkhead--1.3--1.4.sql).  Each subtest FAILS on the code
# it was written against.
#
#  1. classify_view_blocks_update: the update drops bulkhead_classify(text)
#     (its result type gains memory_requested) with a plain DROP FUNCTION:
#     an operator's view on it (the update keeps bulkhead_stats and
#     bulkhead_activity for that very reason) makes ALTER EXTENSION UPDATE
#     fail with 2BP01; the CHANGELOG says nothing of it.
#  2. classify_grant_option_lost: the grants "carried over" to the new
#     bulkhead_classify(text) lose WITH GRANT OPTION, and the grants made by
#     a grantee become the update's own (grantor changed).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('upgrade_review');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\n" . "bulkhead.database = 'postgres'\n");
$node->start;

# --- 1. a view on bulkhead_classify(text) -----------------------------------
$node->safe_psql('postgres', q{
	CREATE EXTENSION bulkhead VERSION '1.3';
	CREATE VIEW my_lane AS SELECT workload, source FROM bulkhead_classify('SELECT 1');
});
my ($ret, $out, $err) = $node->psql('postgres', "ALTER EXTENSION bulkhead UPDATE TO '1.4'");
is($ret, 0, 'classify_view_blocks_update: ALTER EXTENSION bulkhead UPDATE TO 1.4 succeeds')
  or diag $err;
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'bulkhead'"),
	'1.4', 'classify_view_blocks_update: the extension is at 1.4');

# --- 2. grants with grant option --------------------------------------------
$node->safe_psql('postgres', q{
	CREATE DATABASE acl;});
$node->safe_psql('acl', q{
	CREATE EXTENSION bulkhead VERSION '1.3';
	CREATE ROLE alice;
	CREATE ROLE bob;
	REVOKE EXECUTE ON FUNCTION bulkhead_classify(text) FROM PUBLIC;
	GRANT EXECUTE ON FUNCTION bulkhead_classify(text) TO alice WITH GRANT OPTION;
	SET ROLE alice;
	GRANT EXECUTE ON FUNCTION bulkhead_classify(text) TO bob;
	RESET ROLE;
});
my $acl_sql = q{SELECT array_to_string(array(SELECT a FROM unnest(proacl) a ORDER BY a::text), ',')
	  FROM pg_proc WHERE oid = 'bulkhead_classify(text)'::regprocedure};
my $before = $node->safe_psql('acl', $acl_sql);
$node->safe_psql('acl', "ALTER EXTENSION bulkhead UPDATE TO '1.4'");
is($node->safe_psql('acl', $acl_sql), $before,
	'classify_grant_option_lost: bulkhead_classify(text) keeps its ACL as it was (grant option, grantor)');

done_testing();
