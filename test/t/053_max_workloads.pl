# 053_max_workloads.pl: bulkhead.max_workloads reached.
#
# 1. One row too many is refused at INSERT (53400, configuration limit
#    exceeded, naming the setting),
#    whether in one statement or across statements of a transaction; an
#    UPDATE or a DELETE + INSERT within the limit is fine.
# 2. Two transactions that each add the last free row concurrently: one
#    of them is refused, so the table never holds more rows than shared
#    memory has slots, and every row is loaded (READ COMMITTED and
#    REPEATABLE READ).
# 3. A deleted workload whose permit is still held keeps its slot until it
#    is returned.  A workload inserted meanwhile is either refused at
#    INSERT, or usable as soon as the slot is free: it never stays silently
#    unloaded.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use BulkheadTest;

my $node = PostgreSQL::Test::Cluster->new('max_workloads');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\n"
	  . "bulkhead.database = 'postgres'\n"
	  . "bulkhead.max_workloads = 3\n"
	  . "log_line_prefix = '%m [%p] %b '\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION bulkhead');

my $names_query = q{
	SELECT coalesce(string_agg(workload, ',' ORDER BY workload), '') FROM bulkhead_stats};
my $table_query = q{
	SELECT coalesce(string_agg(name, ',' ORDER BY name), '') FROM bulkhead_workload};

# psql on a new connection: (SQLSTATE or 'ok', stderr)
sub run
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql(
		'postgres', "$sql;\n\\echo :LAST_ERROR_SQLSTATE\n",
		on_error_stop => 0);
	my ($state) = $out =~ /(\w{5})\s*$/;
	return ($err eq '' ? 'ok' : $state // '?', $err);
}

#
# 1. The limit at INSERT
#
$node->safe_psql('postgres',
	"INSERT INTO bulkhead_workload (name, max_running) VALUES ('a', 1), ('b', 1)");
my ($state, $err) = run(
	"INSERT INTO bulkhead_workload (name, max_running) VALUES ('c', 1), ('d', 1)");
is($state, '53400', 'two rows beyond 2 of 3: refused with 53400');
like($err, qr/too many bulkhead workloads/, 'message');
like($err, qr/would hold 4 rows; shared memory has room for 3/, 'detail gives the numbers');
like($err, qr/bulkhead\.max_workloads/, 'hint names the setting');
($state, $err) = run(
	"BEGIN; INSERT INTO bulkhead_workload (name, max_running) VALUES ('c', 1);"
	  . " INSERT INTO bulkhead_workload (name, max_running) VALUES ('d', 1)");
is($state, '53400', 'the fourth row in a later statement of the transaction: 53400');
is($node->safe_psql('postgres', $table_query), 'a,b', 'nothing of either was kept');

$node->safe_psql('postgres',
	"INSERT INTO bulkhead_workload (name, max_running) VALUES ('c', 1)");
($state, $err) = run(
	"UPDATE bulkhead_workload SET max_running = max_running + 1");
is($state, 'ok', 'UPDATE of all 3 rows is fine');
($state, $err) = run(
	"BEGIN; DELETE FROM bulkhead_workload WHERE name = 'c';"
	  . " INSERT INTO bulkhead_workload (name, max_running) VALUES ('c2', 2); COMMIT");
is($state, 'ok', 'DELETE one and INSERT another in one transaction is fine');
ok(poll_until($node, "SELECT ($names_query) = 'a,b,c2'", 5),
	'the three workloads are loaded');

#
# 2. Concurrent inserts of the last free row
#
for my $iso ('READ COMMITTED', 'REPEATABLE READ')
{
	$node->safe_psql('postgres', "DELETE FROM bulkhead_workload WHERE name = 'c2'");
	ok(poll_until($node, "SELECT ($names_query) = 'a,b'", 5), "$iso: two workloads");
	my $s1 = session($node);
	my $s2 = session($node);
	my $pid2 = sql($s2, 'SELECT pg_backend_pid()');
	is( sql(
			$s1,
			"BEGIN ISOLATION LEVEL $iso; INSERT INTO bulkhead_workload (name, max_running) VALUES ('r1', 1);"
		),
		'',
		"$iso: T1 inserts r1 (3 rows)");
	send_async($s2,
		"BEGIN ISOLATION LEVEL $iso; INSERT INTO bulkhead_workload (name, max_running) VALUES ('r2', 1); COMMIT;"
	);
	# T2 either waits for T1 or is done already
	poll_until(
		$node, qq{
		SELECT state = 'idle' OR wait_event_type = 'Lock'
		FROM pg_stat_activity WHERE pid = $pid2}, 5);
	sleep(0.2);
	my ($o1, $e1) = sql2($s1, 'COMMIT');
	my ($o2, $e2) = finish_async($s2);
	sql2($s2, 'ROLLBACK');
	my $table = $node->safe_psql('postgres', $table_query);
	note "$iso: T1: " . ($e1 || 'ok') . "; T2: " . ($e2 || 'ok') . "; table: $table";
	my $count = () = $table =~ /[^,]+/g;
	is($count, 3, "$iso: the table holds 3 rows, not more: one insert was refused");
	like($e1 . $e2, qr/too many bulkhead workloads|could not serialize/,
		"$iso: the refused one got a clear error");
	ok(poll_until($node, "SELECT ($names_query) = ($table_query)", 5),
		"$iso: every row of the table is loaded");
	close_session($_) for ($s1, $s2);
	$node->safe_psql('postgres',
		"DELETE FROM bulkhead_workload WHERE name IN ('r1', 'r2');"
		  . " INSERT INTO bulkhead_workload (name, max_running) VALUES ('c2', 1)");
}
ok(!$node->log_contains('workloads were not loaded'),
	'the worker never had a row it could not load');

#
# 3. A deleted workload that still holds a permit keeps its slot.
#
ok(poll_until($node, "SELECT ($names_query) = 'a,b,c2'", 5), 'a, b, c2 loaded');
my $h = session($node);
is(sql($h, "SELECT bulkhead_acquire('c2')"), '', 'H holds a permit of c2');
$node->safe_psql('postgres', "DELETE FROM bulkhead_workload WHERE name = 'c2'");
ok(poll_until($node, "SELECT ($names_query) = 'a,b'", 5),
	'c2 deleted: gone from bulkhead_stats');
($state, $err) = run(
	"INSERT INTO bulkhead_workload (name, max_running) VALUES ('d', 1)");
note "INSERT of d while c2 drains: $state $err";
if ($state eq 'ok')
{
	# accepted: then d must not stay unusable once c2's permit is returned
	my ($s, $e) = run("SELECT bulkhead_acquire('d', '1s')");
	ok($s eq 'ok' || $s eq '42704',
		"while c2 drains, acquire of d either works or fails at once ($s)");
	is(sql($h, "SELECT bulkhead_release('c2')"), '', "H returns c2's permit");
	my $t0 = time();
	ok(poll_until($node, "SELECT ($names_query) = 'a,b,d'", 3),
		'd is loaded within 3 s of the slot becoming free');
	note sprintf('d loaded %.1f s after the release', time() - $t0);
	($s, $e) = run("SELECT bulkhead_acquire('d'); SELECT bulkhead_release('d')");
	is($s, 'ok', 'd can be acquired');
}
else
{
	is($state, '53400', 'INSERT of d refused while c2 drains: 53400');
	like($err, qr/bulkhead\.max_workloads|still/, 'with a clear message');
	is(sql($h, "SELECT bulkhead_release('c2')"), '', "H returns c2's permit");
}
close_session($h);

$node->stop;
done_testing();
