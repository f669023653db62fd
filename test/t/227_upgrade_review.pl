# 227_upgrade_review.pl: defects found by the 1.4 review in the update
# 1.3 -> 1.4 (sql/bulkhead--1.3--1.4.sql).
#
#  1. classify_view_blocks_update: the update drops bulkhead_classify(text)
#     (its result type gains memory_requested; PostgreSQL cannot change a
#     function's result type in place): an operator's view on it made
#     ALTER EXTENSION UPDATE fail with DROP FUNCTION's 2BP01, whose hint
#     (DROP ... CASCADE) cannot be followed, and the CHANGELOG said nothing.
#     Now the update stops first with 2BP01, names the view and says what to
#     do (drop it, update, create it again); nothing is changed; done so,
#     the update succeeds and the view works again.
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
my ($ret, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nALTER EXTENSION bulkhead UPDATE TO '1.4'");
isnt($ret, 0, 'classify_view_blocks_update: the update stops');
like($err, qr/ERROR:  2BP01: cannot update extension bulkhead to 1\.4: objects depend on function bulkhead_classify\(text\)/,
	'classify_view_blocks_update: with 2BP01 and a message that says why');
like($err, qr/DETAIL: .*view my_lane/, 'classify_view_blocks_update: the detail names the view');
like($err, qr/HINT:  Drop them, run ALTER EXTENSION bulkhead UPDATE, then create them again\./,
	'classify_view_blocks_update: the hint says what to do');
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'bulkhead'"),
	'1.3', 'classify_view_blocks_update: nothing changed, the extension is at 1.3');
$node->safe_psql('postgres', q{
	DROP VIEW my_lane;
	ALTER EXTENSION bulkhead UPDATE TO '1.4';
	CREATE VIEW my_lane AS SELECT workload, source FROM bulkhead_classify('SELECT 1');});
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'bulkhead'"),
	'1.4', 'classify_view_blocks_update: dropped, updated and made again: the extension is at 1.4');
is($node->safe_psql('postgres', 'SELECT source FROM my_lane'), 'superuser',
	'classify_view_blocks_update: the view works again');

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
