# 222_caps_frame.pl: a lane's settings in the statement's frame (1.4).
#
# A client's top-level statement sets its lane's caps once, in a GUC
# nesting level kept over its phases and over the next statements under
# the same caps (caps.c).  What 1.3 promised must hold as it did with a
# level per phase: every statement runs capped; a SET by the user lowers a
# cap for later statements, never raises one, and outlives the permit as a
# SET does; a set_config() that raises a setting inside a statement is
# capped again from the next statement on, and its value is the session's
# once the permit is gone; SHOW, RESET, savepoints, errors, a permit
# released in the middle of a transaction, and a multi-statement query
# string each see the values they should.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('caps_frame', conf => "work_mem = '4MB'\n");
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, settings)
	VALUES ('capped', 8, 8, '{work_mem=1MB}');});
wait_loaded($node, 'capped', 8);

my $s = session($node);
sub wm { return sql($s, "SELECT current_setting('work_mem')"); }

# every statement of the transaction runs capped; SHOW too
is(sql($s, "BEGIN; SELECT bulkhead_acquire_xact('capped');"), '', 'a transaction permit of the lane');
is(wm(), '1MB', 'a statement runs capped');
is(wm(), '1MB', 'and the next one');
is(sql($s, 'SHOW work_mem'), '1MB', 'SHOW sees the cap');

# a SET LOCAL lowers it for the statements after it
is(sql($s, "SET LOCAL work_mem = '512kB'"), '', 'SET LOCAL lowers work_mem');
is(wm(), '512kB', 'the statement after it runs with the lower value');
is(sql($s, "SET LOCAL work_mem = '64MB'"), '', 'SET LOCAL raises work_mem');
is(wm(), '1MB', 'the cap wins over a raise');
is(sql($s, 'COMMIT; SHOW work_mem'), '4MB', 'after COMMIT the session\'s own value');

# set_config() raising it inside a statement: capped from the next
# statement on; the SET, not the cap, is the session's value afterwards
sql($s, "BEGIN; SELECT bulkhead_acquire_xact('capped');");
is(sql($s, "SELECT set_config('work_mem', '64MB', false)"), '64MB',
	'set_config() raises work_mem inside a statement');
is(wm(), '1MB', 'the next statement runs capped again');
is(wm(), '1MB', 'and the one after it');
is(sql($s, 'COMMIT; SHOW work_mem'), '64MB',
	'after COMMIT the session keeps the set_config() value, not the cap');
is(sql($s, "RESET work_mem; SHOW work_mem"), '4MB', 'RESET');

# a savepoint rolled back, an error
sql($s, "BEGIN; SELECT bulkhead_acquire_xact('capped'); SAVEPOINT a;");
is(wm(), '1MB', 'capped in a savepoint');
is(sql($s, 'ROLLBACK TO a'), '', 'ROLLBACK TO SAVEPOINT');
is(wm(), '1MB', 'still capped after it (the permit was taken before the savepoint)');
my ($out, $err) = sql2($s, 'SELECT 1 / 0');
like($err, qr/division by zero/, 'a statement fails');
is(sql($s, 'ROLLBACK; SHOW work_mem'), '4MB', 'after the ROLLBACK the session\'s own value');

# a permit taken in a savepoint that is rolled back
sql($s, 'BEGIN; SAVEPOINT a;');
sql($s, "SELECT bulkhead_acquire_xact('capped')");
is(wm(), '1MB', 'capped under a permit taken in a savepoint');
sql($s, 'ROLLBACK TO a');
is(wm(), '4MB', 'the savepoint\'s rollback returned the permit: uncapped');
sql($s, 'COMMIT');

# a session permit released in the middle of a transaction
sql($s, "SELECT bulkhead_acquire('capped')");
sql($s, 'BEGIN');
is(wm(), '1MB', 'capped under a session permit');
sql($s, "SELECT bulkhead_release('capped')");
is(wm(), '4MB', 'uncapped once it is released, in the same transaction');
sql($s, 'COMMIT');

# a multi-statement query string; a SET between statements outlives the permit
sql($s, "SELECT bulkhead_acquire('capped')");
is(sql($s, "SELECT current_setting('work_mem'); SELECT current_setting('work_mem');"),
	"1MB\n1MB", 'each statement of a query string runs capped');
is(sql($s, "SET work_mem = '256kB'; SELECT current_setting('work_mem');"), '256kB',
	'a SET lowers it');
sql($s, "SELECT bulkhead_release('capped')");
is(sql($s, 'SHOW work_mem'), '256kB', 'the SET outlives the permit, as a SET does');
is(sql($s, "RESET work_mem; SHOW work_mem"), '4MB', 'RESET');

close_session($s);
$node->stop;
done_testing();
