# 200_tenants.pl: fair sharing inside a workload (tenants).  Callers name a
# key; the workload's permits go to the keys in turn, the least served
# first, FIFO within a key: a tenant with 50 queued does not delay another
# tenant's single call by more than one grant.  max_running_per_key caps one
# key while others use the rest; max_queued_per_key rejects a key's excess
# with 53B01 while others queue; keys exist only while they hold or wait
# (bulkhead_keys), and a full key table gives 53400, freed as keys go idle.
# bulkhead.key keys transparent admission (SET LOCAL, for a pooler).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $node = PostgreSQL::Test::Cluster->new('tenants');
$node->init;
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'bulkhead'\n"
	  . "bulkhead.database = 'postgres'\n"
	  . "bulkhead.max_keys = 3\n"
	  . "max_connections = 80\n");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION bulkhead;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('t', 1, 100, '60s');
	CREATE TABLE grants (id serial PRIMARY KEY, who text NOT NULL);
	CREATE ROLE plain LOGIN;
	});
wait_loaded($node, 't', 1);

sub keys_in_use
{
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(key || ' ' || running || '/' || queued, ', ' ORDER BY key), '')"
		  . " FROM bulkhead_keys WHERE workload = 't'");
}

# 1. One tenant with 50 queued callers, then one more tenant with one: the
# single caller is served at the first grant after it arrived.
my $h = session($node);
sql($h, "SELECT bulkhead_acquire('t', NULL, 'noisy')");
my @pairs = map { [ 't', sprintf('n%02d', $_), 'noisy' ] } 1 .. 50;
my @s = queue_recorders($node, @pairs);
is(keys_in_use(), 'noisy 1/50', 'bulkhead_keys: the noisy key holds 1, 50 wait');
push @s, queue_recorders($node, [ 't', 'quiet', 'quiet' ]);
is(keys_in_use(), 'noisy 1/50, quiet 0/1', 'the quiet key waits behind them');
is( $node->safe_psql('postgres',
		"SELECT string_agg(coalesce(key, '-'), ',') FROM bulkhead_activity WHERE workload = 't' AND state = 'running'"),
	'noisy', 'bulkhead_activity.key names the holder\'s key');
sql($h, "SELECT bulkhead_release('t')");
my @order = split /,/, grant_order($node, 51);
is($order[0], 'quiet', 'the quiet tenant is served at the next grant, before 50 of the noisy one');
is(join(',', @order[ 1 .. 50 ]), join(',', map { $_->[1] } @pairs),
	'FIFO within the noisy key');
finish_recorders(@s);
is(keys_in_use(), '', 'keys disappear from bulkhead_keys once idle');

# The same without keys is FIFO: the late caller is served last
sql($h, "SELECT bulkhead_acquire('t')");
@s = queue_recorders($node, (map { [ 't', "u$_" ] } 1 .. 5), [ 't', 'late' ]);
sql($h, "SELECT bulkhead_release('t')");
is(grant_order($node, 6), 'u1,u2,u3,u4,u5,late', 'without keys: arrival order');
finish_recorders(@s);

# 2. Keys in turn: two keys with three waiting each alternate, and the
# callers without a key compete as one more key.
sql($h, "SELECT bulkhead_acquire('t', NULL, 'a')");
@s = queue_recorders($node,
	[ 't', 'a1', 'a' ], [ 't', 'a2', 'a' ], [ 't', 'a3', 'a' ],
	[ 't', 'b1', 'b' ], [ 't', 'b2', 'b' ], [ 't', 'x1' ]);
sql($h, "SELECT bulkhead_release('t')");
my $order = grant_order($node, 6);
like($order, qr/^(b1,x1|x1,b1),/, 'the groups that held nothing go first (b, and the callers without a key)');
my @o = split /,/, $order;
my %pos = map { $o[$_] => $_ } 0 .. $#o;
ok($pos{a1} < $pos{a2} && $pos{a2} < $pos{a3} && $pos{b1} < $pos{b2}, 'FIFO within each key');
ok($pos{b2} < $pos{a3}, 'b is not starved by a');
finish_recorders(@s);

# 3. max_running_per_key: key a may hold 1 of the 3 permits; b takes
# another at once while a's second caller waits
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_running = 3, max_running_per_key = 1 WHERE name = 't'");
wait_loaded($node, 't', 3);
sql($h, "SELECT bulkhead_acquire('t', NULL, 'a')");
my $a2 = session($node);
send_async($a2, "SELECT bulkhead_acquire('t', NULL, 'a');");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE state = 'queued' AND key = 'a'"),
	'a second caller of key a waits, with two permits free');
my $b = session($node);
is(sql($b, "SELECT bulkhead_try_acquire('t', '0', 'b')"), 't', 'key b takes a permit at once');
is(keys_in_use(), 'a 1/1, b 1/0', 'bulkhead_keys shows the cap at work');
sql($h, "SELECT bulkhead_release('t')");
my ($out, $err) = finish_async($a2);
is($err, '', 'the release of a\'s permit serves a\'s waiter');
is(keys_in_use(), 'a 1/0, b 1/0', 'a\'s waiter holds a\'s permit now');
sql($a2, "SELECT bulkhead_release('t')");
sql($b, "SELECT bulkhead_release('t')");

# 4. max_queued_per_key: with all permits held, a's one waiting slot is
# taken; a's next caller is rejected at once, c's still queues
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_running = 2, max_queued_per_key = 1 WHERE name = 't'");
wait_loaded($node, 't', 2);
sql($h, "SELECT bulkhead_acquire('t', NULL, 'a')");
sql($b, "SELECT bulkhead_acquire('t', NULL, 'b')");
send_async($a2, "SELECT bulkhead_acquire('t', NULL, 'a');");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE state = 'queued' AND key = 'a'"),
	'key a has its one caller waiting');
my ($v, $vpid) = verbose_session($node);
($out, $err) = sql2($v, "SELECT bulkhead_acquire('t', '10s', 'a')");
like($err, qr/53B01.*key "a" of workload "t" is full.*max_queued_per_key/s,
	'the key\'s excess is rejected at once with 53B01');
is(sql($v, "SELECT bulkhead_try_acquire('t', '10s', 'a')"), 'f', 'bulkhead_try_acquire returns false');
my $c = session($node);
send_async($c, "SELECT bulkhead_acquire('t', NULL, 'c');");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE state = 'queued' AND key = 'c'"),
	'another key still queues');

# 5. The key table (bulkhead.max_keys = 3): a, b, c are in use; a fourth
# key fails with 53400, a caller without a key does not need one
($out, $err) = sql2($v, "SELECT bulkhead_acquire('t', '10s', 'd')");
like($err, qr/53400.*too many bulkhead keys in use.*bulkhead\.max_keys/s,
	'a new key with the key table full: 53400 naming the setting');
# a held since before c arrived, c nothing: a's release goes to c, the
# least served, and b's then to a's waiter
sql($h, "SELECT bulkhead_release('t')");
($out, $err) = finish_async($c);
is($err, '', 'a\'s release serves c\'s waiter (c is the least served)');
is(keys_in_use(), 'a 0/1, b 1/0, c 1/0', 'a\'s waiter still waits');
sql($b, "SELECT bulkhead_release('t')");
($out, $err) = finish_async($a2);
is($err, '', 'b\'s release serves a\'s waiter');
sql($a2, "SELECT bulkhead_release('t')");
is(keys_in_use(), 'c 1/0', 'a and b went idle and left the table');
($out, $err) = sql2($v, "SELECT bulkhead_acquire('t', '10s', 'd')");
is($err, '', 'a new key fits once keys went idle');
is(keys_in_use(), 'c 1/0, d 1/0', 'c and d in use');
sql($v, "SELECT bulkhead_release('t')");
sql($c, "SELECT bulkhead_release('t')");

# 6. Bad keys: too long (22023), in the argument and in the setting; NULL
# and empty are no key
($out, $err) = sql2($v, "SELECT bulkhead_acquire('t', NULL, repeat('k', 64))");
like($err, qr/22023.*key is too long.*at most 63 bytes/s, 'a key of 64 bytes: 22023');
($out, $err) = sql2($v, "SET bulkhead.key = '" . ('k' x 64) . "'");
like($err, qr/22023.*bulkhead\.key/s, 'bulkhead.key of 64 bytes: 22023');
sql($v, "SELECT bulkhead_acquire('t', NULL, '')");
is( $node->safe_psql('postgres', "SELECT key IS NULL FROM bulkhead_activity WHERE pid = $vpid"),
	't', 'an empty key is no key');
is(keys_in_use(), '', 'and takes no entry of the key table');
sql($v, "SELECT bulkhead_release('t')");

# 7. Transparent admission as a tenant: SET LOCAL bulkhead.key in the
# transaction (the way behind a transaction-pooling proxy)
$node->safe_psql('postgres', "ALTER ROLE plain SET bulkhead.workload = 't'");
my $gated = $node->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'plain' ]);
is( sql($gated,
		"BEGIN; SET LOCAL bulkhead.key = 'tenant-42';"
		  . " SELECT key FROM bulkhead_activity WHERE pid = pg_backend_pid(); COMMIT;"),
	'tenant-42', 'SET LOCAL bulkhead.key keys the transaction\'s gate permit');
is(keys_in_use(), '', 'the key is gone with the transaction');

# 8. bulkhead_keys is for pg_read_all_stats: keys name tenants
my ($ret, $o2, $e2) = $node->psql('postgres', 'SELECT * FROM bulkhead_keys',
	extra_params => [ '-U', 'plain' ]);
like($e2, qr/permission denied/, 'a plain role may not read bulkhead_keys');
$node->safe_psql('postgres', 'GRANT pg_read_all_stats TO plain');
($ret, $o2, $e2) = $node->psql('postgres', 'SELECT count(*) FROM bulkhead_keys',
	extra_params => [ '-U', 'plain' ]);
is($e2, '', 'a member of pg_read_all_stats may');

my $st = $node->safe_psql('postgres',
	"SELECT running || '/' || queued || ' ' || (acquired = released) FROM bulkhead_stats WHERE workload = 't'");
is($st, '0/0 true', 'nothing left running or queued; acquired = released');

close_session($_) for ($h, $a2, $b, $c, $v, $gated);
$node->stop;
done_testing();
