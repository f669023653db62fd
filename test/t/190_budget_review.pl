# Shared budgets (issue 21), review: defects found in the first version,
# each shown by a sequence of sessions whose outcome does not depend on
# timing (every wait is bounded and polled).
#
#  1. A permit released in one leaf goes to a waiter of a sibling leaf at
#     once: it is not left free for a newcomer of the releasing leaf.
#  2. A budget's own waiters (queued before it got children) are served
#     when a permit frees, and counted in its queued column.
#  3. A leaf that leaves its tree while callers wait, and comes back after
#     they were served, adds no phantom waiters to its new budget.
#  4. Two concurrent transactions cannot together make a cycle of parents,
#     nor reservations that exceed the budget's max_running, that each
#     alone would have been refused.
#  5. A budget with 200 children created in one statement is loaded: the
#     worker does not need more LWLocks than a process may hold.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('budget_review');

# a leaf's or budget's column of bulkhead_stats
sub col
{
	my ($w, $c) = @_;
	return $node->safe_psql('postgres',
		"SELECT $c FROM bulkhead_stats WHERE workload = '$w'");
}

sub queued_in
{
	my ($w, $n) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok( poll_until(
			$node,
			"SELECT count(*) = $n FROM bulkhead_activity"
			  . " WHERE workload = '$w' AND state = 'queued'"),
		"$n caller(s) queued in $w");
}

###########################################################################
# 1. release in leaf a, waiter in sibling b
###########################################################################
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('p1', 1, 0);
	INSERT INTO bulkhead_workload (name, max_running, max_queued, parent) VALUES
	    ('a1', 1, 5, 'p1'), ('b1', 1, 5, 'p1');
});
ok(poll_until($node, "SELECT count(*) = 2 FROM bulkhead_stats WHERE parent = 'p1'"),
	'p1 has two children');
{
	my $s1 = session($node);
	my $s2 = session($node);
	is(sql($s1, "SELECT bulkhead_try_acquire('a1')"), 't', 'a1 takes p1\'s permit');
	send_async($s2, "SELECT bulkhead_acquire('b1', '10s');");
	queued_in('b1', 1);
	# the release hands the permit to b1's waiter: a1's newcomer finds p1 full
	is( sql($s1, "SELECT bulkhead_release('a1'); SELECT bulkhead_try_acquire('a1')"),
		"\nf",
		'the permit released in a1 went to the waiter of b1, not to a new caller of a1');
	my ($out, $err) = finish_async($s2);
	is($err, '', 'the waiter of b1 got its permit (no timeout)');
	sql($s1, "SELECT bulkhead_release_all()");
	sql($s2, "SELECT bulkhead_release_all()");
	close_session($_) for ($s1, $s2);
}
ok(poll_until($node, "SELECT running = 0 FROM bulkhead_stats WHERE workload = 'p1'"),
	'p1 drained');

###########################################################################
# 2. a budget's own waiter, queued before the budget got its first child
###########################################################################
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('r2', 1, 5);
});
wait_loaded($node, 'r2', 1);
{
	my $s1 = session($node);
	my $s2 = session($node);
	is(sql($s1, "SELECT bulkhead_try_acquire('r2')"), 't', 'r2 held');
	send_async($s2, "SELECT bulkhead_acquire('r2', '10s');");
	queued_in('r2', 1);
	$node->safe_psql('postgres', q{
		INSERT INTO bulkhead_workload (name, max_running, max_queued, parent)
		VALUES ('c2', 1, 5, 'r2');
	});
	ok(poll_until($node, "SELECT parent = 'r2' FROM bulkhead_stats WHERE workload = 'c2'"),
		'r2 became a budget');
	is(col('r2', 'queued'), '1', 'the budget shows its own waiter as queued');
	sql($s1, "SELECT bulkhead_release('r2')");
	ok( poll_until(
			$node,
			"SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'r2' AND state = 'running'",
			10),
		'the budget\'s own waiter gets the permit its holder released');
	my ($out, $err) = finish_async($s2);
	is($err, '', 'no timeout for the budget\'s own waiter');
	sql($s2, "SELECT bulkhead_release_all()");
	close_session($_) for ($s1, $s2);
}

###########################################################################
# 3. a leaf leaves its tree with a waiter, comes back once it was served
###########################################################################
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('p3', 2, 0);
	INSERT INTO bulkhead_workload (name, max_running, max_queued, parent) VALUES ('l3', 1, 5, 'p3');
});
ok(poll_until($node, "SELECT parent = 'p3' FROM bulkhead_stats WHERE workload = 'l3'"),
	'l3 under p3');
{
	my $s1 = session($node);
	my $s2 = session($node);
	is(sql($s1, "SELECT bulkhead_try_acquire('l3')"), 't', 'l3 held');
	send_async($s2, "SELECT bulkhead_acquire('l3', '10s');");
	queued_in('l3', 1);
	$node->safe_psql('postgres', "UPDATE bulkhead_workload SET parent = NULL WHERE name = 'l3'");
	ok(poll_until($node, "SELECT parent IS NULL FROM bulkhead_stats WHERE workload = 'l3'"),
		'l3 is a root');
	sql($s1, "SELECT bulkhead_release('l3')");
	my ($out, $err) = finish_async($s2);
	is($err, '', 'the waiter of l3 was served');
	sql($s2, "SELECT bulkhead_release('l3')");
	$node->safe_psql('postgres', "UPDATE bulkhead_workload SET parent = 'p3' WHERE name = 'l3'");
	ok(poll_until($node, "SELECT parent = 'p3' FROM bulkhead_stats WHERE workload = 'l3'"),
		'l3 is back under p3');
	is( $node->safe_psql('postgres',
			"SELECT string_agg(workload || ':' || running || '/' || queued, ',' ORDER BY workload)"
			  . " FROM bulkhead_stats WHERE workload IN ('p3', 'l3')"),
		'l3:0/0,p3:0/0',
		'nothing held or queued under p3, and none shown');
	close_session($_) for ($s1, $s2);
}

###########################################################################
# 4. write skew between two transactions: a cycle, and reservations
###########################################################################
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('x4', 2), ('y4', 2);
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('q4', 3);
	INSERT INTO bulkhead_workload (name, max_running, parent) VALUES
	    ('u4', 3, 'q4'), ('v4', 3, 'q4');
});
{
	my $s1 = session($node);
	my $s2 = session($node);
	sql($s1, "BEGIN; UPDATE bulkhead_workload SET parent = 'y4' WHERE name = 'x4'");
	send_async($s2, "BEGIN; UPDATE bulkhead_workload SET parent = 'x4' WHERE name = 'y4'; COMMIT;");
	# s2 reaches the point where it waits for s1 (or fails), then s1 commits
	poll_until($node,
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
		  . " AND query LIKE '%parent = ''x4''%'", 10);
	my ($o1, $e1) = sql2($s1, "COMMIT");
	my ($o2, $e2) = finish_async($s2);
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM bulkhead_workload WHERE name IN ('x4', 'y4') AND parent IS NOT NULL"),
		'1',
		'two concurrent updates did not make a cycle of parents');
	# (a cycle left in the table would make every later change fail)
	$node->safe_psql('postgres',
		"UPDATE bulkhead_workload SET parent = NULL WHERE name IN ('x4', 'y4')");

	sql($s1, "BEGIN; UPDATE bulkhead_workload SET reserved = 2 WHERE name = 'u4'");
	send_async($s2, "BEGIN; UPDATE bulkhead_workload SET reserved = 2 WHERE name = 'v4'; COMMIT;");
	poll_until($node,
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
		  . " AND query LIKE '%reserved = 2 WHERE name = ''v4''%'", 10);
	($o1, $e1) = sql2($s1, "COMMIT");
	($o2, $e2) = finish_async($s2);
	cmp_ok(
		$node->safe_psql('postgres',
			"SELECT sum(reserved) FROM bulkhead_workload WHERE parent = 'q4'"),
		'<=', 3,
		'two concurrent updates did not reserve more than q4\'s max_running');
	close_session($_) for ($s1, $s2);
}
$node->stop;

###########################################################################
# 5. one budget and 200 children in one statement
###########################################################################
my $big = PostgreSQL::Test::Cluster->new('budget_review_big');
$big->init;
$big->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\n"
	  . "bulkhead.database = 'postgres'\n"
	  . "bulkhead.max_workloads = 256\n");
$big->start;
$big->safe_psql('postgres', 'CREATE EXTENSION bulkhead');
$big->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, parent)
	SELECT 'big', 10, NULL
	UNION ALL
	SELECT 'leaf' || i, 1, 'big' FROM generate_series(1, 200) i;
});
ok( poll_until(
		$big, "SELECT count(*) = 200 FROM bulkhead_stats WHERE parent = 'big'", 30),
	'the 200 children of big are loaded under it');
my $log = slurp_file($big->logfile);
unlike($log, qr/too many LWLocks/, 'the worker took no more LWLocks than allowed');
$big->stop;

done_testing();
