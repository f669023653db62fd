# 580_memory_small.pl: small memory requests (1.5, under
# bulkhead.small_memory_request) and the large waiter they pass.
#
#  1. While a large request waits, a stream of small ones (two sessions,
#     one small query after another) is granted at once, none of them
#     counted as a wait, and the large one's wait still ends at its
#     memory_timeout: it runs then with what is free, shrunk, never an
#     error.  A small cursor opened before the large request keeps memory
#     in use all along, so that the large one never fits (what a stream of
#     small ones does, made certain).  Before 1.5 the stream's first query
#     waited behind the large one, to its memory_timeout.
#  2. A small waiter that does not fit (128 kB free) is cancelled, another
#     terminated: nothing is left waiting or granted; the large waiter
#     between them, and the holder, are unaffected.
#  3. bulkhead.small_memory_request = 0 (reload) turns it off: a small
#     request waits behind the large one again.
#
# Workload mem_s: max_memory 2MB, memory_timeout 5s (then 60s).  A large request: a
# cursor over a sorted function scan of a million rows at work_mem 1MB (two
# nodes: 2 MB); a small one: a query over generate_series at work_mem
# 256kB (256 kB, under the default threshold of 1MB).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = bulkhead_node('memory_small', memory_request => 'limit',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n");

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('mem_s', 8, 8, '300s', '2MB', '5s');
});
wait_loaded($node, 'mem_s', 8);

is($node->safe_psql('postgres', 'SHOW bulkhead.small_memory_request'), '1MB',
	'bulkhead.small_memory_request is 1MB by default');
is($node->safe_psql('postgres',
		"SELECT context FROM pg_settings WHERE name = 'bulkhead.small_memory_request'"),
	'sighup', 'and is set for the whole server (reload)');

my $large = 'DECLARE cl CURSOR FOR SELECT g, current_setting(\'work_mem\') AS wm'
  . ' FROM generate_series(1, 1000000) g ORDER BY g DESC';
my $small = 'SELECT count(*) FROM (SELECT pg_sleep(0.05) FROM generate_series(1, 2)) s';

# granted/waiting/waits/shrunk of mem_s
sub mem
{
	return $node->safe_psql('postgres',
		"SELECT memory_granted || '/' || memory_waiting || '/' || memory_waits || '/' || memory_shrunk"
		  . " FROM bulkhead_stats WHERE workload = 'mem_s'");
}

sub state_of
{
	my ($pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(state, ','), 'none') FROM bulkhead_activity WHERE pid = $pid");
}

sub waiting_for_memory
{
	my ($n) = @_;
	return poll_until($node,
		"SELECT count(*) = $n FROM bulkhead_activity a JOIN pg_stat_activity s USING (pid)"
		  . " WHERE a.workload = 'mem_s' AND a.state = 'waiting for memory'"
		  . " AND s.wait_event_type = 'Extension'");
}

# a session holding a transaction permit of mem_s, at work_mem $wm
sub in_workload
{
	my ($wm) = @_;
	my ($s, $pid) = verbose_session($node);
	is(sql($s, "SET work_mem = '$wm'; BEGIN; SELECT bulkhead_acquire_xact('mem_s');"), '',
		"a session takes a permit of mem_s (work_mem $wm)");
	return ($s, $pid);
}

# --- 1. a stream of small requests passes the large waiter -----------------
{
	my ($anchor) = in_workload('256kB');
	sql($anchor, 'DECLARE ca CURSOR FOR SELECT g FROM generate_series(1, 1000000) g');
	is(mem(), '262144/0/0/0', 'a small cursor holds 256 kB of mem_s');

	my @stream = map { [ in_workload('256kB') ] } 1 .. 2;
	my ($l, $lpid) = in_workload('1MB');
	my $t0 = time();
	send_async($l, "$large;");
	ok(waiting_for_memory(1), 'the large request (2 MB) waits: 256 kB are in use');

	my $loop = "DO \$\$ BEGIN FOR i IN 1..8 LOOP PERFORM count(*) FROM"
	  . " (SELECT pg_sleep(0.05) FROM generate_series(1, 2)) s; END LOOP; END \$\$;";
	send_async($_->[0], $loop) for @stream;
	for my $s (@stream)
	{
		my ($out, $err) = finish_async($s->[0]);
		is($err, '', 'a session ran eight small queries, one after another');
	}
	my $streamed = time() - $t0;
	ok($streamed < 5, "the stream ended before the large one's memory_timeout ("
		  . sprintf('%.1f s', $streamed) . ')');
	is(state_of($lpid), 'waiting for memory', 'the large request still waits');
	like(mem(), qr{^\d+/1/1/0$}, 'the small requests were granted at once: only the large one waits');

	my ($out, $err) = finish_async($l);
	my $waited = time() - $t0;
	is($err, '', 'the large request runs at its memory_timeout, never an error');
	ok($waited >= 4.9 && $waited < 15,
		'its wait ended at its memory_timeout (5 s): ' . sprintf('%.1f s', $waited));
	is(sql($l, 'FETCH 1 FROM cl'), '1000000|896kB',
		'shrunk to what was free then (1792 kB: work_mem 896kB for its two nodes)');
	is(mem(), '2097152/0/1/1', 'counted as one wait, shrunk');

	sql($_->[0], 'COMMIT') for @stream;
	sql($l, 'COMMIT');
	sql($anchor, 'COMMIT');
	is(mem(), '0/0/1/1', 'at rest nothing is granted');
	close_session($_->[0]) for @stream;
	close_session($l);
	close_session($anchor);
}

# --- 2. a small waiter cancelled, another terminated -----------------------
{
	# (waits that outlast the steps below)
	$node->safe_psql('postgres',
		"UPDATE bulkhead_workload SET memory_timeout = '60s', max_running = 9 WHERE name = 'mem_s'");
	wait_loaded($node, 'mem_s', 9);
	$node->safe_psql('postgres', "SELECT bulkhead_stats_reset('mem_s')");
	my ($h) = in_workload('1920kB');
	sql($h, 'DECLARE ch CURSOR FOR SELECT g FROM generate_series(1, 1000000) g');
	is(mem() =~ s{/.*}{}r, '1966080', 'a cursor holds 1920 kB of 2 MB: 128 kB are free');

	my ($l) = in_workload('1MB');
	send_async($l, "$large;");
	ok(waiting_for_memory(1), 'a large request waits');

	my ($c, $cpid) = in_workload('256kB');
	send_async($c, "$small;");
	ok(waiting_for_memory(2), 'a small request that does not fit waits too');
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($cpid)");
	my ($out, $err) = finish_async($c);
	like($err, qr/57014/, 'the small waiter is cancelled (57014)');
	ok(waiting_for_memory(1), 'the large one still waits');

	my ($k, $kpid) = in_workload('256kB');
	send_async($k, "$small;");
	ok(waiting_for_memory(2), 'another small request waits');
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($kpid)");
	ok(poll_until($node, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $kpid"),
		'the small waiter is terminated');
	is(mem(), '1966080/1/3/0', 'only the large one waits; nothing granted to the small ones');

	sql($h, 'CLOSE ch');
	($out, $err) = finish_async($l);
	is($err, '', 'the holder\'s close grants the large request');
	is(sql($l, 'FETCH 1 FROM cl'), '1000000|1MB', 'whole');
	sql($l, 'COMMIT');
	sql($h, 'COMMIT');
	sql($c, 'ROLLBACK');
	is(mem(), '0/0/3/0', 'at rest nothing is granted or waiting');
	close_session($_) for ($l, $h, $c);
	eval { close_session($k) };
}

# --- 3. turned off: a small request waits behind the large one -------------
{
	$node->safe_psql('postgres', q{
		ALTER SYSTEM SET bulkhead.small_memory_request = 0;
		SELECT pg_reload_conf();
	});
	ok(poll_until($node, "SELECT current_setting('bulkhead.small_memory_request') = '0'"),
		'bulkhead.small_memory_request = 0, reloaded');
	$node->safe_psql('postgres', "SELECT bulkhead_stats_reset('mem_s')");
	my ($h) = in_workload('1MB');
	sql($h, 'DECLARE ch CURSOR FOR SELECT g FROM generate_series(1, 1000000) g');
	my ($l) = in_workload('1MB');
	send_async($l, "$large;");
	ok(waiting_for_memory(1), 'a large request waits');
	my ($s, $spid) = in_workload('256kB');
	send_async($s, "$small;");
	ok(waiting_for_memory(2), 'a small request that fits in the free megabyte waits behind it');
	sql($h, 'CLOSE ch');
	my ($out, $err) = finish_async($l);
	is($err, '', 'the holder\'s close grants the large request first');
	is(state_of($spid), 'waiting for memory', 'the small one waits on: the large one holds all 2 MB');
	sql($l, 'COMMIT');
	($out, $err) = finish_async($s);
	is($err, '', 'then the small one');
	sql($_, 'COMMIT') for ($h, $s);
	is(mem(), '0/0/2/0', 'at rest nothing is granted; two waits');
	close_session($_) for ($l, $h, $s);
	$node->safe_psql('postgres', q{
		ALTER SYSTEM RESET bulkhead.small_memory_request;
		SELECT pg_reload_conf();
	});
}

$node->stop;
done_testing();
