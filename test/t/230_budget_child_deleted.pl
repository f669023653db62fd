# 230_budget_child_deleted.pl: a workload deleted (or renamed) while its
# statements hold memory grants takes those grants out of the budgets above
# it at once (grantstate.c: bulkhead_grants_undefine re-parents the level to
# -1, "a deleted workload's grants count at the server only"), while its
# permits stay counted in its budget until they drain (loader.c plan_trees).
# The budget's max_memory then admits a sibling's grant on top of the
# running ones: the budget's subtree is granted more than its max_memory.
# DESIGN.md, Version 1.4: "A budget's max_memory bounds the grants of its
# whole subtree ... A grant must fit at every level."
#
# Correct behaviour asserted: while the deleted (renamed) child's cursor
# holds its 2 MB, the budget still counts them, and a sibling's 2 MB
# request waits (the budget has 3 MB).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('budget_child_deleted', memory_request => 'limit',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n");

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('b', 8, 8, '60s', '3MB', '60s');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent)
	VALUES ('c1', 4, 4, '60s', 'b'), ('c2', 4, 4, '60s', 'b'), ('c3', 4, 4, '60s', 'b');
});
wait_loaded($node, 'c3', 4);

my $sorted = 'SELECT count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s';

sub granted
{
	my ($w) = @_;
	return $node->safe_psql('postgres',
		"SELECT memory_granted FROM bulkhead_stats WHERE workload = '$w'");
}

sub in_workload
{
	my ($w) = @_;
	my ($s, $pid) = verbose_session($node);
	is(sql($s, "BEGIN; SELECT bulkhead_acquire_xact('$w');"), '', "a session takes a permit of $w");
	return ($s, $pid);
}

foreach my $case (['delete', q{DELETE FROM bulkhead_workload WHERE name = 'c1'}, 'c2'],
				  ['rename', q{UPDATE bulkhead_workload SET name = 'c2x' WHERE name = 'c2'}, 'c3'])
{
	my ($what, $change, $sibling) = @$case;
	my $victim = $what eq 'delete' ? 'c1' : 'c2';

	my ($h) = in_workload($victim);
	sql($h, "DECLARE c CURSOR FOR $sorted");
	is(granted('b'), '2097152', "$what: the budget counts the child's 2 MB");

	$node->safe_psql('postgres', $change);
	ok(poll_until($node, $what eq 'delete'
			? "SELECT NOT EXISTS (SELECT FROM bulkhead_stats WHERE workload = '$victim')"
			: "SELECT EXISTS (SELECT FROM bulkhead_stats WHERE workload = 'c2x' AND parent = 'b')"),
		"$what: the worker loaded the change");
	# the child's permit still counts in the budget (admission)
	is($node->safe_psql('postgres', "SELECT running FROM bulkhead_stats WHERE workload = 'b'"),
		'1', "$what: the child's permit still counts as running in the budget");
	is(granted('b'), '2097152',
		"$what: the budget still counts the 2 MB its former child's cursor holds");

	# a sibling's 2 MB request must not fit in the budget's 3 MB
	my ($s, $pid) = in_workload($sibling);
	send_async($s, "DECLARE s CURSOR FOR $sorted;");
	ok( poll_until($node, qq{
			SELECT state = 'waiting for memory' FROM bulkhead_activity WHERE pid = $pid}),
		"$what: the sibling's statement waits for the budget's memory");
	is($node->safe_psql('postgres', "SELECT sum(memory_granted) FROM bulkhead_activity"),
		'2097152', "$what: 2 MB granted in the budget's subtree (3 MB), not 4 MB");
	sql($h, 'ROLLBACK');
	finish_async($s);
	sql($s, 'ROLLBACK');
	close_session($_) for ($s, $h);
	ok(poll_until($node, "SELECT memory_granted = 0 FROM bulkhead_memory"),
		"$what: nothing left granted");
}

done_testing();
