# 112_classify_outer_user.pl: a session is classified as its own user, not
# as the owner of a SECURITY DEFINER function that runs first.
#
# The planner evaluates an IMMUTABLE function with constant arguments
# before the statement that calls it starts, so the function's own
# statement is the first of the transaction to reach the gate, and runs as
# the function's owner.  A rule for the owner's role must not send the
# caller's transaction to the owner's workload: the caller's rule applies
# (or none).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('classify_outer_user');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE owner_r;
	CREATE ROLE caller_r LOGIN;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('owner_wl', 4, 0, '0'), ('caller_wl', 4, 0, '0');
	INSERT INTO bulkhead_rule (position, role, workload)
	VALUES (10, 'owner_r', 'owner_wl'), (20, 'caller_r', 'caller_wl');
	CREATE FUNCTION public.plus_one(int) RETURNS int
	    LANGUAGE sql IMMUTABLE SECURITY DEFINER AS 'SELECT $1 + 1';
	ALTER FUNCTION public.plus_one(int) OWNER TO owner_r;
	CREATE FUNCTION public.plus_two(int) RETURNS int
	    LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER
	    AS 'BEGIN RETURN (SELECT $1 + count(*)::int FROM pg_class WHERE false) + 2; END';
	ALTER FUNCTION public.plus_two(int) OWNER TO owner_r;
});
wait_loaded($node, 'owner_wl', 4);
wait_loaded($node, 'caller_wl', 4);
wait_classified($node, 'caller_r', 'caller_wl');

my $s = $node->background_psql('postgres',
	on_error_stop => 0,
	extra_params => [ '-U', 'caller_r' ]);
my $pid = $s->query_safe('SELECT pg_backend_pid()');

for my $call ('plus_one(1)', 'plus_two(1)')
{
	$s->query_safe("BEGIN");
	my $v = $s->query_safe("SELECT $call");
	ok($v eq '2' || $v eq '3', "$call returned");
	is( $node->safe_psql(
			'postgres',
			"SELECT string_agg(workload, ',') FROM bulkhead_activity WHERE pid = $pid"),
		'caller_wl',
		"SELECT $call: the caller's transaction holds the caller's workload");
	is( $node->safe_psql(
			'postgres',
			"SELECT workload || ':' || source || ':' || rule_position FROM bulkhead_classify($pid)"),
		'caller_wl:rule:20',
		"SELECT $call: the published classification is the caller's");
	$s->query_safe("COMMIT");
}
is($node->safe_psql('postgres',
		"SELECT acquired FROM bulkhead_stats WHERE workload = 'owner_wl'"),
	'0', 'the owner\'s workload was never taken');
$s->quit;

$node->stop;
done_testing();
