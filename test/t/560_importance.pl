# 560_importance.pl: importance (1.5) as a user sets it and sees it.
# bulkhead.importance from a connection's options: a plain role may only
# lower it there (low), and is refused at connect otherwise; a superuser
# may give any.  bulkhead.aging_interval changes by reload.  A waiter's
# importance in bulkhead_activity rises with aging (one step per interval),
# a holder's stays what its wait carried; neither is boosted nor borrowing
# without a lock holder's boost.  bulkhead_history counts the boosts per
# interval, and a history file saved by 1.4 (format 1, no boost counters)
# is read back by 1.5, its boosts zero.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = bulkhead_node('importance', conf => "bulkhead.history_interval = 1\n");
$node->safe_psql('postgres', q{
	CREATE ROLE imp_plain LOGIN;
	CREATE ROLE imp_high LOGIN;
	ALTER ROLE imp_high SET bulkhead.importance = high;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('w', 1, 4, '60s');
	GRANT SELECT ON bulkhead_activity TO imp_plain;});
wait_loaded($node, 'w', 1);

# --- a connection's options ---------------------------------------------------
# (as PGOPTIONS: the same startup packet's options as "options=-c ...")
sub connect_with
{
	my ($role, $value) = @_;
	local $ENV{PGOPTIONS} = "-c bulkhead.importance=$value";
	my ($ret, $out, $err) = $node->psql('postgres', 'SHOW bulkhead.importance',
		extra_params => [ '-U', $role ]);
	return $ret == 0 ? $out : "refused: $err";
}
like(connect_with('imp_plain', 'high'),
	qr/refused: .*permission denied to raise bulkhead.importance to "high"/,
	'a plain role asking for high in its connection options is refused at connect');
like(connect_with('imp_plain', 'normal'), qr/refused: .*A connection's options may only lower it/s,
	'normal too: the options are applied before the role\'s own settings');
is(connect_with('imp_plain', 'low'), 'low', 'low is accepted from the options');
like(connect_with('imp_high', 'high'), qr/refused/,
	'a role given high by ALTER ROLE cannot ask for it in its options either (it may SET it)');
is($node->safe_psql('postgres', 'SHOW bulkhead.importance', extra_params => [ '-U', 'imp_high' ]),
	'high', 'a role given high by a superuser\'s ALTER ROLE has it');
is(connect_with($node->safe_psql('postgres', 'SELECT current_user'), 'high'), 'high',
	'a superuser gives any importance in its options');

# --- bulkhead.aging_interval: reload only --------------------------------------
my ($ret, $out, $err) = $node->psql('postgres', "SET bulkhead.aging_interval = '1s'");
like($err, qr/cannot be changed now/, 'SET of bulkhead.aging_interval is refused');
$node->safe_psql('postgres', "ALTER SYSTEM SET bulkhead.aging_interval = '3s'");
$node->reload;
ok(poll_until($node, "SELECT current_setting('bulkhead.aging_interval') = '3s'", 30),
	'bulkhead.aging_interval changes by reload');

# --- a waiter's importance rises with aging ------------------------------------
my $holder = session($node);
is(sql($holder, "SELECT bulkhead_acquire('w')"), '', 'a holder takes the permit');
my $waiter = session($node, 'postgres', 'imp_plain');
my $wpid = sql($waiter, 'SELECT pg_backend_pid()');
send_async($waiter, "SELECT bulkhead_acquire('w');");
ok(poll_until($node,
		"SELECT EXISTS (SELECT 1 FROM bulkhead_activity WHERE pid = $wpid AND state = 'queued')", 30),
	'the waiter queues');
my $first = $node->safe_psql('postgres',
	"SELECT importance || '|' || boosted || '|' || borrowed || '|' || wait_ms::int"
	  . " FROM bulkhead_activity WHERE pid = $wpid");
my ($imp, $boosted, $borrowed, $ms) = split /\|/, $first;
SKIP:
{
	skip "the first look came ${ms} ms into the wait", 1 if $ms >= 2500;
	is($imp, 'normal', 'a waiter of normal importance shows normal before an aging interval');
}
is("$boosted|$borrowed", 'false|false', 'a waiter that holds no awaited lock is not boosted');
ok(poll_until($node,
		"SELECT importance = 'high' AND wait_ms >= 3000 FROM bulkhead_activity WHERE pid = $wpid", 30),
	'after an aging interval of waiting, the normal waiter shows high (one step)');
is($node->safe_psql('postgres',
		"SELECT importance || '|' || boosted || '|' || borrowed FROM bulkhead_activity"
		  . " WHERE workload = 'w' AND state = 'running'"),
	'normal|false|false', 'the holder shows the importance its wait carried, no boost');
# what a plain role sees of the others' rows: the same columns
is($node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_activity WHERE workload = 'w' AND importance IS NOT NULL",
		extra_params => [ '-U', 'imp_plain' ]),
	'1', 'a plain role sees its own row\'s importance, not the others\' rows');
is(sql($holder, "SELECT bulkhead_release('w')"), '', 'the holder releases');
my ($aout, $aerr) = finish_async($waiter);
is($aerr, '', 'the waiter is served');
is($node->safe_psql('postgres',
		"SELECT importance FROM bulkhead_activity WHERE pid = $wpid"),
	'normal', 'once served, it shows the importance its wait carried, not its aged rank');
sql($waiter, "SELECT bulkhead_release('w')");
close_session($holder);
close_session($waiter);

# --- boosts in bulkhead_stats and bulkhead_history -----------------------------
is($node->safe_psql('postgres',
		"SELECT boosts || '|' || boosts_borrowed FROM bulkhead_stats WHERE workload = 'w'"),
	'0|0', 'no lock holder waited: no boost counted');
ok(poll_until($node,
		"SELECT count(*) > 0 FROM bulkhead_history WHERE workload = 'w' AND acquired > 0"
		  . " AND boosts = 0 AND boosts_borrowed = 0", 30),
	'bulkhead_history has the boosts of each interval');

# --- a history file of 1.4 (format 1) is read by 1.5 ---------------------------
# layout (historyfile.c): magic, format, sizeof(row), count; an interval
# (start, end: int64 us since 2000-01-01; nrows int32, padded to 24 bytes);
# its rows of format 1: workload char[64], 8 counters int64 (acquired,
# released, rejected_full, timed_out, cancelled, moved_in, moved_out,
# memory_waits), wait_p99_us and hold_p99_us double, peak_running and
# peak_queued int32, peak_memory_granted int64: 160 bytes
$node->stop;
my $file = $node->data_dir . '/pg_stat/bulkhead_history.stat';
my $start = 3600 * 1_000_000;      # 2000-01-01 01:00 UTC
my $row = pack('a64 q8 d2 l2 q', 'from_1_4', 7, 6, 1, 0, 0, 0, 0, 2,
	1500.0, -1.0, 3, 2, 65536);
is(length($row), 160, 'a row of format 1 is 160 bytes');
open(my $fh, '>:raw', $file) or die "could not write $file: $!";
print $fh pack('L4', 0x42484831, 1, 160, 1)
  . pack('q q l x4', $start, $start + 60_000_000, 1) . $row;
close($fh);
$node->start;
is($node->safe_psql('postgres', q{
		SELECT acquired || '|' || released || '|' || rejected_full || '|' || memory_waits
		       || '|' || peak_running || '|' || peak_memory_granted
		       || '|' || boosts || '|' || boosts_borrowed
		  FROM bulkhead_history WHERE workload = 'from_1_4'}),
	'7|6|1|2|3|65536|0|0',
	'a history saved by 1.4 is read back, its boosts zero');
unlike(slurp_file($node->logfile), qr/ignoring bulkhead history file/,
	'the file of format 1 is not ignored');

# and a 1.5 file is saved and read back with its counters
my $before = $node->safe_psql('postgres',
	"SELECT count(*) FROM bulkhead_history WHERE boosts IS NOT NULL");
$node->restart;
cmp_ok($node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_history WHERE boosts IS NOT NULL"),
	'>=', $before, 'a clean restart keeps the rows with their boosts');

$node->stop;
done_testing();
