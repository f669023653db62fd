# 210_lane_settings.pl: a lane's settings (1.3) are the values seen INSIDE
# each statement that runs while its permit is held, and the session's own
# values come back after it, whatever way the statement ends: an error, an
# error caught by a plpgsql EXCEPTION block, a ROLLBACK TO SAVEPOINT, a
# client that wraps each statement in a savepoint (psql ON_ERROR_ROLLBACK,
# pgJDBC autosave), a terminated backend.  A utility that commits
# internally (VACUUM, CREATE INDEX CONCURRENTLY) is capped for the session
# and the session's values are put back after it, after an error at the
# next statement (even a SHOW or a SET), as RESET when they were the reset
# values (so that a reload of postgresql.conf, or ALTER ROLE ... SET, still
# applies).  A SET by the user lowers a cap for later statements, never
# raises it.
#
# The values inside VACUUM and CREATE INDEX CONCURRENTLY are read by an
# expression index whose IMMUTABLE plpgsql function raises a NOTICE with
# them: ANALYZE evaluates it for its sample, CREATE INDEX CONCURRENTLY when
# it builds the index, after its first internal commit.  The function fails
# on demand (SET bh.fail = on) for the tables whose index asks for it.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

# jit on, as before PostgreSQL 19 (whose default is off), so that a lane's
# jit=off has something to cap
my $node = bulkhead_node('lane_settings', conf => "jit = on\n");
lane_functions($node);

# caps(): the settings a lane may cap, in one line:
#   work_mem hash_mem_multiplier maintenance_work_mem temp_file_limit
#   max_parallel_workers_per_gather max_parallel_maintenance_workers jit
my $SESSION = '4MB 2 64MB -1 2 2 on';     # the defaults, and jit on
my $HEAVY = '1MB 1 64MB 5MB 0 2 off';
my $MAINT = '2MB 2 3MB -1 2 0 on';

# web: the role's session lane, no settings; heavy: statements whose plan
# costs at least 100000; maint: utilities.  costly() makes a plan cost
# 250000 and runs at once.
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, settings)
	VALUES ('web', 4, 4, '30s', NULL),
	       ('heavy', 2, 4, '30s', '{work_mem=1MB,hash_mem_multiplier=1,temp_file_limit=5MB,max_parallel_workers_per_gather=0,jit=off}'),
	       ('maint', 2, 4, '30s', '{maintenance_work_mem=3MB,max_parallel_maintenance_workers=0,work_mem=2MB}');
	CREATE ROLE app LOGIN;
	GRANT CREATE ON SCHEMA public TO app;
	INSERT INTO bulkhead_rule (position, role, workload) VALUES (1, 'app', 'web');
	INSERT INTO bulkhead_rule (position, role, workload, min_cost) VALUES (2, 'app', 'heavy', 100000);
	INSERT INTO bulkhead_rule (position, role, workload, command) VALUES (3, 'app', 'maint', '{utility}');

	-- a NOTICE with the values in force, then an error
	CREATE FUNCTION boom() RETURNS int LANGUAGE plpgsql AS $$
	BEGIN
		RAISE NOTICE 'inside: %', caps();
		RETURN 1 / (costly() - 1);
	END $$;
	-- the values in force in a block, in its handler and after it
	CREATE FUNCTION blocks() RETURNS text LANGUAGE plpgsql AS $$
	DECLARE
		r text;
	BEGIN
		BEGIN
			r := 'block: ' || caps();
			PERFORM set_config('work_mem', '64kB', true);
			PERFORM 1 / (costly() - 1);
		EXCEPTION WHEN division_by_zero THEN
			r := r || '; handler: ' || caps();
		END;
		RETURN r || '; after: ' || caps();
	END $$;
	-- the index expression of the utilities' tables
	CREATE FUNCTION ix(i int, may_fail bool) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
	BEGIN
		RAISE NOTICE 'ix: %', public.caps();
		IF may_fail AND current_setting('bh.fail', true) = 'on' THEN
			RAISE EXCEPTION 'ix fails as asked';
		END IF;
		RETURN i;
	END $$;
	CREATE TABLE tok (id int);
	CREATE TABLE tbad (id int);
	INSERT INTO tok VALUES (1);
	INSERT INTO tbad VALUES (1);
	CREATE INDEX tok_ix ON tok (ix(id, false));
	CREATE INDEX tbad_ix ON tbad (ix(id, true));
	ALTER TABLE tok OWNER TO app;
	ALTER TABLE tbad OWNER TO app;
});
wait_loaded($node, 'maint', 2);
ok( poll_until(
		$node, q{
		SET bulkhead.exempt_superuser = off; SET ROLE app;
		SELECT (SELECT workload FROM bulkhead_classify('SELECT costly()')) = 'heavy'
		   AND (SELECT workload FROM bulkhead_classify('VACUUM tok')) = 'maint'
		   AND (SELECT workload FROM bulkhead_classify('SELECT 1')) = 'web'}),
	'the statement rules are loaded');

# the values that the NOTICEs 'ix: ...' of a statement's stderr show,
# each once, in order, joined by '|' (an expression index is evaluated once
# per row and per index: the table has one row, and tok gets a second and a
# third index on the way)
sub ix_notices
{
	my ($err) = @_;
	my %seen;
	return join('|', grep { !$seen{$_}++ } $err =~ /NOTICE:\s+ix: ([^\n]*)/g);
}

my $app = session($node, 'postgres', 'app');
my $apid = sql($app, 'SELECT pg_backend_pid()');
my ($out, $err);

is(sql($app, 'SELECT held(), caps()'), "web/auto|$SESSION", 'a cheap statement takes web, uncapped');
is(sql($app, 'SELECT held(), caps(), costly()'), "heavy/auto|$HEAVY|1",
	'a costly one takes heavy and runs with its caps');
is(sql($app, 'SELECT held(), caps()'), "web/auto|$SESSION", 'the next statement has the session\'s values');

# --- 1. a capped statement fails ------------------------------------------
($out, $err) = sql2($app, 'SELECT boom(), costly()');
like($err, qr/NOTICE:\s+inside: \Q$HEAVY\E\n.*ERROR:\s+division by zero/s,
	'a failing statement runs with the caps until its error');
is(sql($app, 'SELECT caps()'), $SESSION, 'after its error the session\'s values are back');
is( $node->safe_psql('postgres', "SELECT running FROM bulkhead_stats WHERE workload = 'heavy'"),
	'0', 'and its permit is returned');

# ... in a transaction block: the values are back after ROLLBACK
($out, $err) = sql2($app, 'BEGIN; SELECT boom(), costly();');
like($err, qr/inside: \Q$HEAVY\E.*division by zero/s, 'in a block, the same error');
is(sql($app, 'ROLLBACK; SELECT held(), caps()'), "web/auto|$SESSION",
	'after ROLLBACK the session\'s values are back');

# --- 2. an error caught by a plpgsql EXCEPTION block ------------------------
is( sql($app, 'SELECT blocks(), costly()'),
	"block: $HEAVY; handler: $HEAVY; after: $HEAVY|1",
	'an error caught in a block keeps the caps in the handler and after it (the block\'s set_config undone)');
is(sql($app, 'SELECT caps()'), $SESSION, 'and the session\'s values after the statement');

# --- 3. ROLLBACK TO SAVEPOINT after a capped statement ----------------------
is( sql(
		$app, q{BEGIN; SELECT held(); SAVEPOINT s;
		SET LOCAL work_mem = '256kB';
		SELECT held(), caps(), costly();}),
	"web/auto\nheavy/auto from web|256kB 1 64MB 5MB 0 2 off|1",
	'in a savepoint, a costly statement moves the permit; a SET LOCAL below the cap holds in it');
is( sql($app, 'ROLLBACK TO SAVEPOINT s; SELECT held(), caps()'),
	"heavy/auto from web|$HEAVY",
	'after ROLLBACK TO SAVEPOINT the transaction still holds heavy: its caps, the SET LOCAL undone');
($out, $err) = sql2($app, 'SAVEPOINT s2; SELECT boom(), costly();');
like($err, qr/division by zero/, 'a capped statement fails in another savepoint');
is( sql($app, 'ROLLBACK TO SAVEPOINT s2; SELECT held(), caps()'),
	"heavy/auto from web|$HEAVY",
	'after ROLLBACK TO SAVEPOINT of the failure: still heavy\'s caps');
is(sql($app, 'COMMIT; SELECT held(), caps()'), "web/auto|$SESSION",
	'after COMMIT the session\'s values are back');

# --- 4. a savepoint around each statement (psql ON_ERROR_ROLLBACK) ----------
sql($app, '\\set ON_ERROR_ROLLBACK on');
is(sql($app, 'BEGIN; SELECT held(), caps();'), "web/auto|$SESSION",
	'ON_ERROR_ROLLBACK: the transaction starts in web');
is(sql($app, 'SELECT held(), caps(), costly();'), "heavy/auto from web|$HEAVY|1",
	'ON_ERROR_ROLLBACK: a costly statement in its savepoint moves to heavy, capped');
($out, $err) = sql2($app, 'SELECT boom(), costly();');
like($err, qr/inside: \Q$HEAVY\E.*division by zero/s,
	'ON_ERROR_ROLLBACK: a capped statement fails (psql rolls back to its savepoint)');
is(sql($app, 'SELECT held(), caps();'), "heavy/auto from web|$HEAVY",
	'ON_ERROR_ROLLBACK: the transaction goes on in heavy, capped');
is(sql($app, "SET work_mem = '512kB'; SELECT caps();"), "512kB 1 64MB 5MB 0 2 off",
	'ON_ERROR_ROLLBACK: a SET below the cap lowers it');
is(sql($app, 'COMMIT; SELECT held(), caps();'), "web/auto|512kB 2 64MB -1 2 2 on",
	'ON_ERROR_ROLLBACK: after COMMIT the session\'s values, with its own SET');
sql($app, 'RESET work_mem');
sql($app, '\\set ON_ERROR_ROLLBACK off');
is(sql($app, 'SELECT caps()'), $SESSION, 'RESET work_mem');

# --- 5. SET lowers a cap for later statements, never raises it --------------
is( sql(
		$app, q{BEGIN; SELECT costly();
		SET work_mem = '512kB'; SELECT current_setting('work_mem');
		SET work_mem = '1GB'; SELECT current_setting('work_mem');
		SET LOCAL jit = on; SELECT current_setting('jit');
		SHOW work_mem;}),
	"1\n512kB\n1MB\noff\n1MB",
	'in heavy: a SET below the cap holds, a SET above it does not, jit stays off');
is(sql($app, 'COMMIT; SELECT caps()'), "1GB 2 64MB -1 2 2 on",
	'after the transaction the session\'s own SET (1GB) is its value');
is(sql($app, 'SELECT caps(), costly()'), "$HEAVY|1", 'and a later costly statement is capped again');
# set_config(..., false) inside a capped statement is a SET of the
# session's value, as inside a function with a SET clause: it lasts, and the
# next capped statement is capped again
is( sql($app, "SELECT set_config('hash_mem_multiplier', '8', false), costly(); SELECT caps()"),
	"8|1\n1GB 8 64MB -1 2 2 on",
	'a set_config() inside a capped statement sets the session\'s value');
is(sql($app, 'SELECT caps(), costly()'), "$HEAVY|1", 'which the next capped statement caps again');
sql($app, 'RESET hash_mem_multiplier');
sql($app, 'RESET work_mem');

# a permit released in the middle of a transaction: its caps end with it
is( sql(
		$app, q{BEGIN; SELECT bulkhead_acquire('maint');
		SELECT held(), caps();
		SELECT bulkhead_release('maint');
		SELECT held(), caps();
		COMMIT;}),
	"\nmaint/session, web/auto|$MAINT\n\nweb/auto|$SESSION",
	'a session permit taken and released inside a transaction: its caps last while it is held, not to the end of the transaction');

# --- 6. a backend terminated mid-statement --------------------------------
my $v = session($node, 'postgres', 'app');
my $vpid = sql($v, 'SELECT pg_backend_pid()');
$v->query_until(qr/started\n/, "\\echo started\nSELECT costly(), pg_sleep(60);\n");
ok( poll_until(
		$node, qq{
		SELECT count(*) = 1 FROM bulkhead_activity a JOIN pg_stat_activity s USING (pid)
		 WHERE pid = $vpid AND a.workload = 'heavy' AND a.state = 'running'
		   AND s.wait_event = 'PgSleep'}),
	'a capped statement sleeps in heavy');
is(sql($app, 'SELECT held(), caps(), costly()'), "heavy/auto|$HEAVY|1",
	'another session runs in heavy beside it, with its caps');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($vpid)");
ok( poll_until(
		$node, qq{
		SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $vpid)
		   AND NOT EXISTS (SELECT FROM bulkhead_activity WHERE pid = $vpid)
		   AND (SELECT running FROM bulkhead_stats WHERE workload = 'heavy') = 0}),
	'the terminated backend is gone and its heavy permit returned');
close_session($v);
is(sql($app, 'SELECT held(), caps()'), "web/auto|$SESSION",
	'the other session\'s values are its own');
lanes_paired($node, 'after the terminate', 'web', 'heavy', 'maint');

# --- 7. VACUUM and CREATE INDEX CONCURRENTLY: capped for the session --------
($out, $err) = sql2($app, 'VACUUM (ANALYZE) tok');
is(ix_notices($err), $MAINT, 'VACUUM (ANALYZE) runs with maint\'s caps');
is(sql($app, 'SELECT held(), caps()'), "web/auto|$SESSION", 'and the session\'s values come back');
($out, $err) = sql2($app, 'CREATE INDEX CONCURRENTLY tok_cic ON tok (ix(id, false))');
is(ix_notices($err), $MAINT, 'CREATE INDEX CONCURRENTLY builds with maint\'s caps');
is(sql($app, 'SELECT held(), caps()'), "web/auto|$SESSION", 'and the session\'s values come back');
is( $node->safe_psql('postgres',
		"SELECT indisvalid FROM pg_index WHERE indexrelid = 'tok_cic'::regclass"),
	't', 'the index is built');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_activity WHERE pid = $apid"),
	'0', 'nothing is held after it');

# the session's own values below the caps stay; above them, come back
($out, $err) = sql2($app, "SET maintenance_work_mem = '1MB'; VACUUM (ANALYZE) tok; SHOW maintenance_work_mem");
is(ix_notices($err), '2MB 2 1MB -1 2 0 on', 'VACUUM: a session value below the cap is kept');
is($out, '1MB', 'and it is the session\'s value after');
($out, $err) = sql2($app, "SET maintenance_work_mem = '1GB'; VACUUM (ANALYZE) tok; SHOW maintenance_work_mem");
is(ix_notices($err), $MAINT, 'VACUUM: a session value above the cap is capped');
is($out, '1GB', 'and the session\'s value (1GB) is back after');
is(sql($app, 'RESET maintenance_work_mem; SHOW maintenance_work_mem'), '64MB', 'RESET');

# --- 8. failures of VACUUM and CREATE INDEX CONCURRENTLY ---------------------
sql($app, 'SET bh.fail = on');

($out, $err) = sql2($app, 'VACUUM (ANALYZE) tbad');
like($err, qr/ix: \Q$MAINT\E.*ix fails as asked/s, 'VACUUM (ANALYZE) fails with the caps in force');
is(sql($app, 'SHOW maintenance_work_mem'), '64MB', 'a SHOW right after it sees the session\'s value');
is(sql($app, 'SELECT caps()'), $SESSION, 'so does the statement after');

($out, $err) = sql2($app, 'VACUUM (ANALYZE) tbad');
like($err, qr/ix fails as asked/, 'VACUUM (ANALYZE) fails again');
is( sql($app, "SET maintenance_work_mem = '20MB'; SHOW maintenance_work_mem; SELECT caps()"),
	"20MB\n4MB 2 20MB -1 2 2 on",
	'a SET right after it holds, in the statements after it too (the session\'s values are put back before it)');
is(sql($app, 'RESET maintenance_work_mem; SELECT caps()'), $SESSION,
	'RESET after it gives the reset value');

($out, $err) = sql2($app, 'CREATE INDEX CONCURRENTLY tbad_cic ON tbad (ix(id, true))');
like($err, qr/ix: \Q$MAINT\E.*ix fails as asked/s,
	'CREATE INDEX CONCURRENTLY fails after its first commit, capped');
is(sql($app, 'SHOW maintenance_work_mem'), '64MB', 'a SHOW right after it sees the session\'s value');
is( sql($app, q{
		SELECT string_agg(name || '/' || source, ' ' ORDER BY name) FROM pg_settings
		 WHERE name IN ('maintenance_work_mem', 'work_mem', 'max_parallel_maintenance_workers')}),
	'maintenance_work_mem/default max_parallel_maintenance_workers/default work_mem/default',
	'the values are put back as RESET: their source is the default again');
$node->safe_psql('postgres', 'DROP INDEX tbad_cic');

# one that fails before its first commit (the abort undoes the caps itself)
($out, $err) = sql2($app, 'VACUUM (ANALYZE) no_such_table');
like($err, qr/no_such_table/, 'VACUUM of a table that does not exist fails at once');
is(sql($app, 'SHOW maintenance_work_mem'), '64MB', 'a SHOW right after it sees the session\'s value');
is(sql($app, 'SELECT caps()'), $SESSION, 'and the statement after');

# a failed one, then a transaction that fails: the values stay put back
($out, $err) = sql2($app, 'VACUUM (ANALYZE) tbad');
like($err, qr/ix fails as asked/, 'VACUUM (ANALYZE) fails');
($out, $err) = sql2($app, 'BEGIN; SELECT caps(); SELECT boom(), costly();');
is($out, $SESSION, 'in the next transaction the session\'s values');
like($err, qr/division by zero/, 'which fails');
is(sql($app, 'ROLLBACK; SHOW maintenance_work_mem'), '64MB',
	'after its ROLLBACK the session\'s value still');
is(sql($app, 'SELECT caps()'), $SESSION, 'and in the statement after');

# a failed one, then at once another one: it is capped too
($out, $err) = sql2($app, 'VACUUM (ANALYZE) tbad');
like($err, qr/ix fails as asked/, 'VACUUM (ANALYZE) fails');
($out, $err) = sql2($app, 'VACUUM (ANALYZE) tok');
is(ix_notices($err), $MAINT, 'the VACUUM that comes right after a failed one is capped too');
is(sql($app, 'SHOW maintenance_work_mem'), '64MB', 'and the session\'s value is back after it');
($out, $err) = sql2($app, 'CREATE INDEX CONCURRENTLY tbad_cic ON tbad (ix(id, true))');
like($err, qr/ix fails as asked/, 'CREATE INDEX CONCURRENTLY fails');
$node->safe_psql('postgres', 'DROP INDEX tbad_cic');
($out, $err) = sql2($app, 'CREATE INDEX CONCURRENTLY tok_cic2 ON tok (ix(id, false))');
is(ix_notices($err), $MAINT,
	'the CREATE INDEX CONCURRENTLY that comes right after a failed one is capped too');
is(sql($app, 'SELECT caps()'), $SESSION, 'and the session\'s values are back after it');
sql($app, 'RESET bh.fail');
lanes_paired($node, 'after the utilities', 'web', 'heavy', 'maint');

# --- 9. values put back as RESET: ALTER ROLE ... SET, a reload ---------------
$node->safe_psql('postgres', "ALTER ROLE app SET maintenance_work_mem = '40MB'");
my $other = session($node, 'postgres', 'app');
is(sql($other, 'SHOW maintenance_work_mem'), '40MB', 'a new session has the role\'s value');
($out, $err) = sql2($other, 'VACUUM (ANALYZE) tok');
is(ix_notices($err), $MAINT, 'VACUUM is capped');
is( sql($other, "SELECT setting || '/' || source FROM pg_settings WHERE name = 'maintenance_work_mem'"),
	'40960/user', 'after it the role\'s value is back, from the role (source user)');
($out, $err) = sql2($other, 'SET bh.fail = on; VACUUM (ANALYZE) tbad');
like($err, qr/ix fails as asked/, 'a VACUUM fails');
is( sql($other, "SELECT setting || '/' || source FROM pg_settings WHERE name = 'maintenance_work_mem'"),
	'40960/user', 'after it too, the role\'s value, from the role');
close_session($other);
$node->safe_psql('postgres', 'ALTER ROLE app RESET maintenance_work_mem');

# session a: its value is the configuration file's after its utilities
$node->append_conf('postgresql.conf', "maintenance_work_mem = '50MB'\n");
$node->reload;
my $seen = '';
for (my $i = 0; $i < 100; $i++)
{
	$seen = sql($app, 'SHOW maintenance_work_mem');
	last if $seen eq '50MB';
	usleep(50_000);
}
is($seen, '50MB',
	'a reload applies to a session whose values a lane capped for its utilities and put back');

lanes_paired($node, 'at the end', 'web', 'heavy', 'maint');
is( $node->safe_psql('postgres',
		"SELECT sum(running + queued) FROM bulkhead_stats WHERE workload IN ('web', 'heavy', 'maint')"),
	'0', 'nothing is held or queued');

close_session($app);
$node->stop;
done_testing();
