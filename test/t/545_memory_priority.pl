# 545_memory_priority.pl: a queued lock holder is served first (1.5), on
# the memory grants' side.  A statement waiting for memory whose
# transaction holds a row lock another session waits for:
#
#  1. is served ahead of an earlier waiter when memory frees (its
#     deadlock_timeout at 20s: it asks whether it is waited on every 2 s,
#     and would borrow only at 20 s), and the blocked UPDATE finishes once
#     it commits;
#  2. at its deadlock_timeout, still waited on, is granted over max_memory
#     at its floors (64kB a node), counted at the workload's level past its
#     limit and as shrunk: the blocked UPDATE finishes while the statement
#     that holds the memory still runs;
#  3. cancelled or terminated, boosted while it waits or running on its
#     borrowed floors, returns its grant: at rest memory_granted is 0.
#
# Each boost writes a wait-log line (event=memory_boost, outcome ahead or
# borrowed): the test waits for those, not for a time.  Every session runs
# with work_mem = 1MB: a sorted function scan requests 2 MB (the scan's
# store and the Sort), all of mem_p's max_memory.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = bulkhead_node('memory_priority', memory_request => 'limit',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n"
	  . "deadlock_timeout = '1s'\nbulkhead.log_min_wait = 0\n");

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('mem_p', 8, 8, '300s', '2MB', '300s');
	CREATE TABLE acct (id int PRIMARY KEY, v int);
	INSERT INTO acct VALUES (1, 0), (2, 0);
});
wait_loaded($node, 'mem_p', 8);

my $sorted = 'SELECT g, current_setting(\'work_mem\') AS wm FROM generate_series(1, 10) g ORDER BY g DESC';

# granted/waiting/waits/shrunk of mem_p
sub mem
{
	return $node->safe_psql('postgres',
		"SELECT memory_granted || '/' || memory_waiting || '/' || memory_waits || '/' || memory_shrunk"
		  . " FROM bulkhead_stats WHERE workload = 'mem_p'");
}

sub state_of
{
	my ($pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(state || ' ' || coalesce(memory_granted, -1), ','), 'none')"
		  . " FROM bulkhead_activity WHERE pid = $pid");
}

sub waiting_for_memory
{
	my ($n) = @_;
	return poll_until($node,
		"SELECT count(*) = $n FROM bulkhead_activity a JOIN pg_stat_activity s USING (pid)"
		  . " WHERE a.workload = 'mem_p' AND a.state = 'waiting for memory'"
		  . " AND s.wait_event_type = 'Extension'");
}

# a session holding a transaction permit of mem_p
sub in_workload
{
	my ($s, $pid) = verbose_session($node);
	is(sql($s, "BEGIN; SELECT bulkhead_acquire_xact('mem_p');"), '', 'a session takes a permit of mem_p');
	return ($s, $pid);
}

# the memory_boost lines of the wait log since offset $from, as outcomes
sub boosts_since
{
	my ($from) = @_;
	my @out;
	for my $l (split /\n/, slurp_file($node->logfile, $from))
	{
		push @out, $1 if $l =~ /bulkhead: event=memory_boost workload=mem_p outcome=(\w+)/;
	}
	return join(',', @out);
}

sub await_boosts
{
	my ($from, $want) = @_;
	for (1 .. 600)
	{
		return 1 if boosts_since($from) eq $want;
		usleep(50_000);
	}
	diag 'boost lines: ' . boosts_since($from);
	return 0;
}

# The memory holder H (a cursor holding mem_p's 2 MB); then a lock holder
# A (deadlock_timeout $dt) that updated row 1 and waits for memory with
# $stmt; then B, blocked on A's row.  Returns (H, A, A's pid, B, B's pid).
sub inversion
{
	my ($dt, $stmt) = @_;
	my ($h) = in_workload();
	sql($h, "DECLARE c CURSOR FOR $sorted");
	is(mem() =~ s{/.*}{}r, '2097152', 'the memory holder\'s cursor holds mem_p\'s 2 MB');
	my ($a, $apid) = in_workload();
	sql($a, "SET LOCAL deadlock_timeout = '$dt'");
	is(sql($a, 'UPDATE acct SET v = v + 1 WHERE id = 1'), '', 'A updates row 1');
	send_async($a, $stmt);
	my ($b, $bpid) = verbose_session($node);
	return ($h, $a, $apid, $b, $bpid);
}

sub block_on_a
{
	my ($b, $bpid) = @_;
	send_async($b, 'UPDATE acct SET v = v + 10 WHERE id = 1;');
	ok(poll_until($node, "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $bpid"),
		'B waits for A\'s row lock');
}

# --- 1. served ahead of an earlier waiter ------------------------------------
{
	my $from = -s $node->logfile;
	my ($h) = in_workload();
	sql($h, "DECLARE c CURSOR FOR $sorted");
	my ($w, $wpid) = in_workload();
	send_async($w, "DECLARE cw CURSOR FOR $sorted;");
	ok(waiting_for_memory(1), 'W, holding no lock, waits for memory first');
	my ($a, $apid) = in_workload();
	sql($a, "SET LOCAL deadlock_timeout = '20s'");
	sql($a, 'UPDATE acct SET v = v + 1 WHERE id = 1');
	send_async($a, "DECLARE ca CURSOR FOR $sorted;");
	ok(waiting_for_memory(2), 'A, which updated row 1, waits behind W');
	my ($b, $bpid) = verbose_session($node);
	block_on_a($b, $bpid);
	ok(await_boosts($from, 'ahead'), 'A finds itself waited on: boosted, counted once');

	sql($h, 'CLOSE c');
	ok(poll_until($node, "SELECT state = 'running' AND memory_granted = 2097152 FROM bulkhead_activity WHERE pid = $apid"),
		'when memory frees, A (the lock holder) is granted its 2 MB whole');
	is(state_of($wpid), 'waiting for memory 0', 'W, which came first, still waits');
	my ($out, $err) = finish_async($a);
	is($err, '', 'A\'s cursor opened');
	is(sql($a, 'FETCH 1 FROM ca'), '10|1MB', 'A runs with the work_mem it asked for');
	is(sql($a, 'COMMIT'), '', 'A commits');
	($out, $err) = finish_async($b);
	is($err, '', 'B\'s UPDATE, no longer blocked, finishes');
	($out, $err) = finish_async($w);
	is($err, '', 'W is granted after A');
	is(sql($w, 'FETCH 1 FROM cw'), '10|1MB', 'W runs with its whole grant');
	sql($_, 'COMMIT') for ($w, $h);
	is(mem(), '0/0/2/0', 'at rest nothing is granted; two waits, none shrunk');
	is(boosts_since($from), 'ahead', 'one boost line, served ahead, no borrowing');
	close_session($_) for ($h, $w, $a, $b);
}

# --- 2. over max_memory at its floors, at deadlock_timeout ------------------
{
	my $from = -s $node->logfile;
	$node->safe_psql('postgres', "SELECT bulkhead_stats_reset('mem_p')");
	my ($h, $a, $apid, $b, $bpid) = inversion('1s', "DECLARE ca CURSOR FOR $sorted;");
	ok(waiting_for_memory(1), 'A waits for memory');
	block_on_a($b, $bpid);
	my ($out, $err) = finish_async($a);
	is($err, '', 'A\'s cursor opens while the memory holder still holds its 2 MB');
	is(boosts_since($from), 'ahead,borrowed', 'boosted, then granted over the limit');
	is(state_of($apid), 'running 131072', 'A is granted its floors: 64kB for each of its 2 nodes');
	is(mem(), '2228224/0/1/1', 'mem_p counts 2 MB + 128 kB, past its max_memory; one wait, shrunk');
	is(sql($a, 'FETCH 1 FROM ca'), '10|64kB', 'A runs shrunk to the floor');
	is(sql($a, 'COMMIT'), '', 'A commits');
	($out, $err) = finish_async($b);
	is($err, '', 'B\'s UPDATE finishes');
	is(mem(), '2097152/0/1/1', 'while the memory holder still holds its cursor');
	sql($b, 'SELECT 1');
	is(sql($h, 'FETCH 1 FROM c'), '10|1MB', 'and still runs');
	sql($h, 'COMMIT');
	is(mem(), '0/0/1/1', 'at rest nothing is granted');
	close_session($_) for ($h, $a, $b);
}

# --- 3. cancel and terminate return the grant ---------------------------------
# how: cancel or terminate; when: 'waiter' (boosted, deadlock_timeout far
# off) or 'holder' (running on its borrowed floors)
sub end_boosted
{
	my ($how, $when) = @_;
	my $from = -s $node->logfile;
	my $stmt = $when eq 'waiter' ? "DECLARE ca CURSOR FOR $sorted;"
	  : "SELECT pg_sleep(300), count(*) FROM ($sorted) s;";
	my ($h, $a, $apid, $b, $bpid) = inversion($when eq 'waiter' ? '20s' : '1s', $stmt);
	ok(waiting_for_memory(1), "$how $when: A waits for memory");
	block_on_a($b, $bpid);
	if ($when eq 'waiter')
	{
		ok(await_boosts($from, 'ahead'), "$how $when: A is boosted");
		is(state_of($apid), 'waiting for memory 0', "$how $when: A still waits");
	}
	else
	{
		ok(await_boosts($from, 'ahead,borrowed'), "$how $when: A borrowed its floors");
		ok(poll_until($node, "SELECT memory_granted = 2228224 FROM bulkhead_stats WHERE workload = 'mem_p'"),
			"$how $when: mem_p counts A's floors past its limit");
	}
	$node->safe_psql('postgres', "SELECT pg_${how}_backend($apid)");
	my ($out, $err) = finish_async($a);
	if ($how eq 'cancel')
	{
		like($err, qr/57014/, "$how $when: A's statement fails with 57014");
		sql($a, 'ROLLBACK');
	}
	else
	{
		ok(poll_until($node, "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $apid)"),
			"$how $when: A's backend is gone");
	}
	($out, $err) = finish_async($b);
	is($err, '', "$how $when: B's UPDATE finishes");
	is(mem() =~ s{/\d+/\d+$}{}r, '2097152/0', "$how $when: only the memory holder's 2 MB left, nobody waiting");
	sql($h, 'COMMIT');
	is(mem() =~ s{/.*}{}r, '0', "$how $when: at rest memory_granted is 0");
	close_session($_) for ($h, $a, $b);
}

end_boosted($_->[0], $_->[1])
  for (['cancel', 'waiter'], ['terminate', 'waiter'], ['cancel', 'holder'], ['terminate', 'holder']);

is($node->safe_psql('postgres', 'SELECT sum(v) FROM acct'), '62',
	'each UPDATE committed once: A\'s twice (1 and 2; 3 rolled back), B\'s six times');

$node->stop;
done_testing();
