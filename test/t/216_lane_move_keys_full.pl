# 216_lane_move_keys_full.pl: a move can also fail with 53400 (1.3).  A
# statement rule moves a transaction's permit from web to heavy, and the
# session's key (bulkhead.key) is new to heavy while the table of keys in
# use (bulkhead.max_keys) is full: the move fails as a failed acquire does,
# 53400 with the hint naming the setting, the old permit returned, nothing
# held by the mover, every lane's figures paired.  Once a key is free, the
# same move succeeds.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('lane_move_keys_full', conf => "bulkhead.max_keys = 2\n");
lane_functions($node);

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('web', 4, 4, '10s'), ('heavy', 4, 4, '10s');
	CREATE ROLE app LOGIN;
	GRANT pg_read_all_stats TO app;
	INSERT INTO bulkhead_rule (position, role, workload, min_cost)
	VALUES (1, 'app', 'web', NULL), (2, 'app', 'heavy', 100000);
});
wait_loaded($node, 'heavy', 4);
ok( poll_until(
		$node, q{
		SET bulkhead.exempt_superuser = off; SET ROLE app;
		SELECT workload = 'heavy' FROM bulkhead_classify('SELECT costly()')}),
	'the statement rules are loaded');

sub keys_in_use
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(workload || '/' || key || '/' || running, ',' ORDER BY workload, key)"
		  . ' FROM bulkhead_keys');
}

# Two sessions of key a hold web (one key in use), a superuser holds heavy
# with key x (the second): the table of keys is full
my $mover = session($node, 'postgres', 'app');
my $other = session($node, 'postgres', 'app');
$mover->query_safe('\\set VERBOSITY verbose');
my $mpid = sql($mover, 'SELECT pg_backend_pid()');
is(sql($mover, "SET bulkhead.key = 'a'; BEGIN; SELECT held();"), 'web/auto',
	'the mover holds web, key a');
is(sql($other, "SET bulkhead.key = 'a'; BEGIN; SELECT held();"), 'web/auto',
	'another session holds web, key a');
my $holder = session($node);
is(sql($holder, "SELECT bulkhead_acquire('heavy', key => 'x')"), '',
	'a superuser holds heavy, key x');
is(keys_in_use(), 'heavy/x/1,web/a/2', 'two keys in use: the table is full');

# The costly statement moves the mover's permit: key a is new to heavy
my ($out, $err) = sql2($mover, 'SELECT costly(), held();');
like($err, qr/ERROR:\s+53400: too many bulkhead keys in use\n(?:.*\n)*?HINT:\s+Raise "bulkhead\.max_keys" \(currently 2\)/,
	'the move fails with 53400, the hint naming bulkhead.max_keys');
is($node->safe_psql('postgres', "SELECT count(*) FROM bulkhead_activity WHERE pid = $mpid"),
	'0', 'the mover holds nothing, in web or in heavy');
is(keys_in_use(), 'heavy/x/1,web/a/1', 'web keeps key a for the other session');
is( $node->safe_psql(
		'postgres', q{
		SELECT string_agg(workload || ':' || running || ':' || moved_out || ':' || moved_in,
		                  ',' ORDER BY workload)
		  FROM bulkhead_stats WHERE workload IN ('web', 'heavy')}),
	'heavy:1:0:0,web:1:1:0',
	'web counts the move out, heavy no move in; each holds one permit');
lanes_paired($node, 'after the failed move', 'web', 'heavy');

# After ROLLBACK the transaction passes the gate again; once key x is
# released, the same move succeeds
is(sql($mover, 'ROLLBACK; BEGIN; SELECT held();'), 'web/auto',
	'after ROLLBACK the mover takes web again');
is(sql($holder, "SELECT bulkhead_release('heavy')"), '', 'the superuser releases heavy');
is(sql($mover, 'SELECT costly(), held();'), '1|heavy/auto from web',
	'with a key free, the move succeeds');
is(sql($mover, 'COMMIT'), '', 'the mover commits');
is(sql($other, 'COMMIT'), '', 'the other session commits');
lanes_paired($node, 'at the end', 'web', 'heavy');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_keys'), '0',
	'no key is left in use');

close_session($_) for ($mover, $other, $holder);
$node->stop;
done_testing();
