# 229_memory_timeout_abuse.pl: a concern found by the 1.4 review: what a
# plain role outside any workload can do to everyone else with the
# user-settable bulkhead.memory_timeout.  It FAILS on the code it was
# written against; it follows from the documented FIFO order, so the fix
# may be in the design (bulkhead.memory_timeout PGC_SUSET, or capped by an
# administrator's setting; or a waiter of the server's level alone not
# blocking those that are not short there), not in one line.
#
# server_waiter_blocks_every_workload: with bulkhead.max_memory set, a
# plain role that no workload classifies sets bulkhead.memory_timeout =
# '1h' and asks for more than is free at the server: it waits at the head
# of the server's queue, and marks the server's level for every later
# waiter, whatever its workload.  A statement of workload w, with room in
# w and at the server, waits w's whole memory_timeout behind it: for an
# hour, every statement of the server waits its memory_timeout.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = bulkhead_node('memory_timeout_abuse',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\nbulkhead.max_memory = '4MB'\n");
$node->safe_psql('postgres', q{
	CREATE ROLE plain LOGIN;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('w', 8, 8, '60s', '4MB', '3s');});
wait_loaded($node, 'w', 8);

my $sorted = 'SELECT count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s';

# something holds 2MB of the server's 4MB
my $h = session($node);
sql($h, "BEGIN; DECLARE c CURSOR FOR $sorted;");
is($node->safe_psql('postgres', 'SET work_mem = 64; SELECT memory_granted >= 2097152 FROM bulkhead_memory'),
	't', 'the server has 2MB granted');

# plain, in no workload, asks for 8MB (cut to 4MB) and will wait an hour
my $att = session($node, 'postgres', 'plain');
my $apid = sql($att, 'SELECT pg_backend_pid()');
is(sql($att, 'SELECT workload IS NULL FROM bulkhead_classify()'), 't', 'plain is in no workload');
sql($att, "SET bulkhead.memory_timeout = '1h'; SET work_mem = '4MB'");
send_async($att, "$sorted;");
ok(poll_until($node, "SELECT waiting FROM bulkhead_memory_activity() WHERE pid = $apid"),
	'plain waits for the server\'s memory');

# a statement of w asks for 2MB: w is empty, the server has 2MB free
my $v = session($node);
sql($v, "SET bulkhead.exempt_superuser = off; SET bulkhead.workload = 'w'");
my $t0 = time();
is(sql($v, $sorted), '10', 'w\'s statement runs');
my $took = time() - $t0;
cmp_ok($took, '<', 2.5,
	'server_waiter_blocks_every_workload: w\'s statement, with room in w and at the server, '
	  . 'does not wait its memory_timeout (3s) behind plain\'s hour');
is($node->safe_psql('postgres', "SELECT memory_waits FROM bulkhead_stats WHERE workload = 'w'"),
	'0', 'server_waiter_blocks_every_workload: w counts no wait');

$node->safe_psql('postgres', "SELECT pg_cancel_backend($apid)");
finish_async($att);
sql($h, 'CLOSE c; COMMIT');
close_session($_) for ($att, $h, $v);

done_testing();
