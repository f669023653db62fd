# 233_deleted_workload_unlimited.pl: a workload deleted while its statements
# run keeps its admission limits for them (loader.c/slot.c: a deleted
# workload keeps its config, its queue waits under max_running until it
# drains), but its max_memory is dropped at once
# (grantstate.c: bulkhead_grants_undefine sets max_memory = -1): the
# statement waiting for memory in it is granted at once, and its
# statements are granted more than its max_memory between them.
# DESIGN.md, Version 1.4: the grants of a workload's running statements
# are bounded by its max_memory; "A grant must fit at every level."
#
# Correct behaviour asserted: after the DELETE, the memory waiter goes on
# waiting (as the permit waiter of a deleted workload does), and no more
# than the workload's 3 MB is granted to its statements.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('deleted_unlimited', memory_request => 'limit',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n");

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('dp', 1, 8, '60s', NULL, NULL), ('dm', 8, 8, '60s', '3MB', '60s');
});
wait_loaded($node, 'dm', 8);

my $sorted = 'SELECT count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s';

sub in_workload
{
	my ($w) = @_;
	my ($s, $pid) = verbose_session($node);
	is(sql($s, "BEGIN; SELECT bulkhead_acquire_xact('$w');"), '', "a session takes a permit of $w");
	return ($s, $pid);
}

# dp: one permit held, one caller queued; dm: 2 MB held, 2 MB waiting
my ($ph) = in_workload('dp');
my ($pw, $pw_pid) = verbose_session($node);
send_async($pw, "BEGIN; SELECT bulkhead_acquire_xact('dp');");
my ($mh) = in_workload('dm');
sql($mh, "DECLARE c CURSOR FOR $sorted");
my ($mw, $mw_pid) = in_workload('dm');
send_async($mw, "DECLARE c CURSOR FOR $sorted;");
ok(poll_until($node, "SELECT state = 'queued' FROM bulkhead_activity WHERE pid = $pw_pid"),
	'dp: the second caller is queued for a permit');
ok(poll_until($node, "SELECT state = 'waiting for memory' FROM bulkhead_activity WHERE pid = $mw_pid"),
	'dm: the second statement waits for memory');

$node->safe_psql('postgres', q{DELETE FROM bulkhead_workload WHERE name IN ('dp', 'dm')});
ok(poll_until($node, q{SELECT NOT EXISTS (SELECT FROM bulkhead_stats WHERE workload IN ('dp', 'dm'))}),
	'the worker loaded the deletion');
sleep 1;

is($node->safe_psql('postgres', "SELECT state FROM bulkhead_activity WHERE pid = $pw_pid"),
	'queued', 'deleted dp: its permit waiter still waits under max_running');
is($node->safe_psql('postgres', "SELECT state FROM bulkhead_activity WHERE pid = $mw_pid"),
	'waiting for memory', 'deleted dm: its memory waiter still waits under max_memory');
is($node->safe_psql('postgres', "SELECT sum(memory_granted) FROM bulkhead_activity WHERE workload = 'dm'"),
	'2097152', 'deleted dm: its statements hold no more than its 3 MB (2 MB, not 4 MB)');

sql($ph, 'ROLLBACK');
sql($mh, 'ROLLBACK');
finish_async($_) for ($pw, $mw);
sql($_, 'ROLLBACK') for ($pw, $mw);
close_session($_) for ($ph, $pw, $mh, $mw);
ok(poll_until($node, 'SELECT memory_granted = 0 FROM bulkhead_memory'), 'nothing left granted');

done_testing();
