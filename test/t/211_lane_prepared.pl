# 211_lane_prepared.pl: statement rules and lane settings (1.3) with
# prepared statements, cursors, procedures and the extended protocol.
#
# - EXECUTE is matched by the plan it runs, when its executor starts: a
#   cached generic plan by its own cost (so a parameter that a custom plan
#   would fold away does not make it cheap), a custom plan by its; and it
#   moves a transaction's permit as any statement does.
# - A cached plan with a Gather runs without workers in a lane that caps
#   max_parallel_workers_per_gather at 0, and with at most the cap's above
#   0, as does a plan made before its lane was known (the first statement's
#   EXECUTE or EXPLAIN ANALYZE).
# - DECLARE and FETCH are utilities; a cursor WITH HOLD is materialized at
#   COMMIT with the caps of the permit it was declared under.
# - A procedure (CALL, DO) that commits between its statements does not
#   break, and each of its statements runs with the caps of the permit its
#   transaction holds.
# - EXPLAIN ANALYZE moves the permit for the statement it runs; EXPLAIN
#   alone moves nothing.
# - The extended protocol: pgbench -M extended (the unnamed statement) and
#   -M prepared (named statements, their cached plans), and psql's \bind
#   (16) and \parse / \bind_named (18).
# - A statement planned at the gate (a client's simple query, or a Bind)
#   whose lane changes the planner's settings is planned again under them:
#   a plan with a Gather made before heavy was chosen is replaced by one
#   without (auto_explain logs the plan that runs).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# jit on, as before PostgreSQL 19 (whose default is off), so that a lane's
# jit=off has something to cap
my $node = bulkhead_node('lane_prepared', conf => "jit = on\n");
lane_functions($node);

# caps(): work_mem hash_mem_multiplier maintenance_work_mem temp_file_limit
#   max_parallel_workers_per_gather max_parallel_maintenance_workers jit
my %CAPS = (
	web => '4MB 2 64MB -1 2 2 on',     # no settings: the defaults, jit on
	heavy => '1MB 1 64MB 5MB 0 2 off',
	maint => '2MB 2 3MB -1 2 0 on',
	batch => '3MB 2 64MB -1 2 2 off');

# role app: web, costly statements (100000 and more) to heavy, utilities to
# maint; role batcher: batch, with no statement rule.  costly() makes a
# plan cost 250000; a scan of par filtered by slowish() about 200000.
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, settings)
	VALUES ('web', 4, 4, '30s', NULL),
	       ('heavy', 2, 4, '30s', '{work_mem=1MB,hash_mem_multiplier=1,temp_file_limit=5MB,max_parallel_workers_per_gather=0,jit=off}'),
	       ('maint', 2, 4, '30s', '{maintenance_work_mem=3MB,max_parallel_maintenance_workers=0,work_mem=2MB}'),
	       ('batch', 2, 4, '30s', '{work_mem=3MB,jit=off}');
	CREATE ROLE app LOGIN;
	CREATE ROLE batcher LOGIN;
	-- app's rules match a member of app: its plans are logged
	CREATE ROLE explained LOGIN IN ROLE app;
	ALTER ROLE explained SET session_preload_libraries = 'auto_explain';
	ALTER ROLE explained SET auto_explain.log_min_duration = 0;
	ALTER ROLE explained SET parallel_setup_cost = 0;
	ALTER ROLE explained SET parallel_tuple_cost = 0;
	ALTER ROLE explained SET min_parallel_table_scan_size = 0;
	INSERT INTO bulkhead_rule (position, role, workload) VALUES (1, 'app', 'web');
	INSERT INTO bulkhead_rule (position, role, workload, min_cost) VALUES (2, 'app', 'heavy', 100000);
	INSERT INTO bulkhead_rule (position, role, workload, command) VALUES (3, 'app', 'maint', '{utility}');
	INSERT INTO bulkhead_rule (position, role, workload) VALUES (4, 'batcher', 'batch');

	CREATE FUNCTION slowish(i int) RETURNS bool LANGUAGE plpgsql PARALLEL SAFE COST 10000
	AS $$ BEGIN RETURN i > 0; END $$;
	CREATE TABLE log (id serial, tag text, xid xid8 DEFAULT pg_current_xact_id(),
	                  held text, caps text);
	GRANT ALL ON log, log_id_seq TO app, batcher;
	CREATE TABLE par AS SELECT g AS id FROM generate_series(1, 20000) g;
	ANALYZE par;
	GRANT SELECT ON par TO app;

	-- a procedure that commits between its statements, and in a loop
	CREATE PROCEDURE commits() LANGUAGE plpgsql AS $$
	DECLARE
		r record;
	BEGIN
		INSERT INTO log (tag, held, caps) SELECT 'call 1', held(), caps();
		COMMIT;
		INSERT INTO log (tag, held, caps) SELECT 'call 2', held(), caps();
		ROLLBACK;
		INSERT INTO log (tag, held, caps) SELECT 'call 3', held(), caps();
		COMMIT;
		FOR r IN SELECT g, held() AS h, caps() AS c FROM generate_series(1, 3) g LOOP
			INSERT INTO log (tag, held, caps) VALUES ('loop row ' || r.g, r.h, r.c);
			INSERT INTO log (tag, held, caps) SELECT 'loop body ' || r.g, held(), caps();
			COMMIT;
		END LOOP;
		INSERT INTO log (tag, held, caps) SELECT 'call 4', held(), caps();
	END $$;
});
wait_loaded($node, 'batch', 2);
ok( poll_until(
		$node, q{
		SET bulkhead.exempt_superuser = off; SET ROLE app;
		SELECT (SELECT workload FROM bulkhead_classify('SELECT costly()')) = 'heavy'
		   AND (SELECT workload FROM bulkhead_classify('VACUUM log')) = 'maint'
		   AND (SELECT workload FROM bulkhead_classify('SELECT 1')) = 'web'}),
	'the statement rules are loaded');
ok( poll_until(
		$node, q{
		SET bulkhead.exempt_superuser = off; SET ROLE batcher;
		SELECT workload = 'batch' FROM bulkhead_classify('SELECT costly()')}),
	'the session rule of batcher is loaded');

# the rows of log with tags LIKE $pattern, "tag|held|caps" a line each
sub logged
{
	my ($pattern) = @_;
	return $node->safe_psql('postgres',
		"SELECT tag, held, caps FROM log WHERE tag LIKE '$pattern' ORDER BY id");
}

my $s = session($node, 'postgres', 'app');
my ($out, $err);

# --- 1. PREPARE / EXECUTE: custom and generic plans ---------------------------
sql($s, 'PREPARE q(bool) AS SELECT held(), caps(), CASE WHEN $1 THEN costly() ELSE 0 END');
sql($s, 'SET plan_cache_mode = force_custom_plan');
is(sql($s, 'EXECUTE q(false)'), "web/auto|$CAPS{web}|0",
	'custom plans: EXECUTE with a parameter that folds the cost away runs in web');
is(sql($s, 'EXECUTE q(true)'), "heavy/auto|$CAPS{heavy}|1",
	'custom plans: EXECUTE of a costly plan runs in heavy, with its caps');
sql($s, 'SET plan_cache_mode = force_generic_plan');
is(sql($s, 'EXECUTE q(false)'), "heavy/auto|$CAPS{heavy}|0",
	'generic plan: the cached plan\'s cost sends the same EXECUTE to heavy');
is(sql($s, 'EXECUTE q(false)'), "heavy/auto|$CAPS{heavy}|0", 'and again (the plan from the cache)');
is( sql($s, 'BEGIN; SELECT held(); EXECUTE q(false); SELECT held(), caps(); COMMIT;'),
	"web/auto\nheavy/auto from web|$CAPS{heavy}|0\nheavy/auto from web|$CAPS{heavy}",
	'generic plan: EXECUTE moves the transaction\'s permit from web to heavy, for the rest of it');
is(sql($s, 'SELECT held(), caps()'), "web/auto|$CAPS{web}", 'the next transaction is in web again');
sql($s, 'RESET plan_cache_mode');

# --- 2. a cached plan with a Gather, in a lane without parallel workers -------
sql($s, q{SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
	SET min_parallel_table_scan_size = 0; SET plan_cache_mode = force_generic_plan;
	PREPARE g AS SELECT count(*) FROM par WHERE slowish(id);
	PREPARE cheap AS SELECT count(*) FROM par WHERE id > 0});
$out = sql($s, 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE cheap');
like($out, qr/Workers Planned: 2/, 'a cheap cached plan has a Gather');
like($out, qr/Workers Launched: [12]\b/, 'in web it launches its workers');
$out = sql($s, 'BEGIN; EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE g');
like($out, qr/Workers Planned: 2/, 'a costly cached plan has a Gather (planned before its lane was known)');
like($out, qr/Workers Launched: 0\b/, 'in heavy (max_parallel_workers_per_gather=0) it launches none');
is(sql($s, 'SELECT held(); COMMIT'), 'heavy/auto', 'it ran in heavy');
is(sql($s, 'EXECUTE g'), '20000', 'and its result is whole');

# --- 2b. a cap above 0: the plan's Gather asks for fewer workers ---------------
# (a cached plan, and plans made before the lane was known: EXECUTE and
# EXPLAIN ANALYZE as a transaction's first statement)
$node->safe_psql('postgres', q{UPDATE bulkhead_workload
	SET settings = array_replace(settings, 'max_parallel_workers_per_gather=0',
	                             'max_parallel_workers_per_gather=1') WHERE name = 'heavy'});
ok(poll_until($node, q{SELECT 'max_parallel_workers_per_gather=1' = ANY (settings)
	FROM bulkhead_stats WHERE workload = 'heavy'}), 'heavy caps the workers per Gather at 1');
my $analyze = 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)';
$out = sql($s, "BEGIN; $analyze EXECUTE g");
like($out, qr/Workers Planned: 1\b/, 'a cached plan of 2 workers per Gather asks for 1 in heavy');
unlike($out, qr/Workers Launched: [2-9]/, 'and launches at most 1');
is(sql($s, 'SELECT held(); COMMIT'), 'heavy/auto', 'it ran in heavy');
sql($s, 'SET plan_cache_mode = force_custom_plan');
like(sql($s, "$analyze EXECUTE g"), qr/Workers Planned: 1\b/,
	'EXECUTE, the first statement: its custom plan, made before its lane was known, asks for 1');
like(sql($s, "$analyze SELECT count(*) FROM par WHERE slowish(id)"), qr/Workers Planned: 1\b/,
	'EXPLAIN ANALYZE, the first statement: the same');
is(sql($s, 'EXECUTE g'), '20000', 'the result is whole');
like(sql($s, "$analyze EXECUTE cheap"), qr/Workers Planned: 2\b/, 'in web the workers are those planned');
$node->safe_psql('postgres', q{UPDATE bulkhead_workload
	SET settings = array_replace(settings, 'max_parallel_workers_per_gather=1',
	                             'max_parallel_workers_per_gather=0') WHERE name = 'heavy'});
ok(poll_until($node, q{SELECT 'max_parallel_workers_per_gather=0' = ANY (settings)
	FROM bulkhead_stats WHERE workload = 'heavy'}), 'heavy caps the workers per Gather at 0 again');
sql($s, q{RESET parallel_setup_cost; RESET parallel_tuple_cost;
	RESET min_parallel_table_scan_size; RESET plan_cache_mode});

# --- 3. cursors: DECLARE and FETCH are utilities ------------------------------
is( sql(
		$s, q{BEGIN; SELECT held();
		DECLARE c CURSOR FOR SELECT held(), caps() FROM generate_series(1, 2);
		FETCH 1 FROM c; FETCH 1 FROM c; CLOSE c;
		SELECT held(), caps(); COMMIT;}),
	"web/auto\n"
	  . "maint/auto from web|$CAPS{maint}\nmaint/auto from web|$CAPS{maint}\n"
	  . "maint/auto from web|$CAPS{maint}",
	'DECLARE moves the permit to maint (a utility); the rows FETCH reads run with its caps');
is( sql(
		$s, q{BEGIN;
		DECLARE h CURSOR WITH HOLD FOR SELECT held(), caps() FROM generate_series(1, 2);
		COMMIT;
		SELECT held(), caps();
		FETCH ALL FROM h; CLOSE h;}),
	"web/auto|$CAPS{web}\nmaint/auto|$CAPS{maint}\nmaint/auto|$CAPS{maint}",
	'a cursor WITH HOLD is materialized at COMMIT with the caps of its transaction\'s lane');
lanes_paired($node, 'after the cursors', 'web', 'heavy', 'maint', 'batch');

# --- 4. procedures that commit ------------------------------------------------
my $batcher = session($node, 'postgres', 'batcher');
($out, $err) = sql2($batcher, 'CALL commits()');
is($err, '', 'batcher: CALL of a procedure that commits and rolls back between its statements');
my $expect_batch = join("\n",
	map { "$_|batch/auto|$CAPS{batch}" }
	  ('call 1', 'call 3', 'loop row 1', 'loop body 1', 'loop row 2', 'loop body 2',
		'loop row 3', 'loop body 3', 'call 4'));
is(logged('%'), $expect_batch, 'batcher: each statement of each of its transactions is capped by batch');
is( $node->safe_psql('postgres', q{SELECT count(DISTINCT xid) FROM log}),
	'6', 'in six transactions');
is(sql($batcher, 'SELECT held(), caps()'), "batch/auto|$CAPS{batch}", 'batcher: the next statement too');
is( sql($batcher, q{SHOW work_mem}), '4MB', 'and outside a permit, its own value');
($out, $err) = sql2(
	$batcher, q{DO $$
	BEGIN
		INSERT INTO log (tag, held, caps) SELECT 'do 1', held(), caps();
		COMMIT;
		INSERT INTO log (tag, held, caps) SELECT 'do 2', held(), caps();
	END $$});
is($err, '', 'batcher: DO with a COMMIT');
is( logged('do %'),
	"do 1|batch/auto|$CAPS{batch}\ndo 2|batch/auto|$CAPS{batch}",
	'batcher: each of its statements capped by batch');
$node->safe_psql('postgres', 'TRUNCATE log');

# role app: the CALL is a utility (maint); its transactions after a COMMIT
# take a permit when their first statement starts
($out, $err) = sql2($s, 'CALL commits()');
is($err, '', 'app: CALL of the procedure');
my %by_held = ('maint/auto' => $CAPS{maint}, 'web/auto' => $CAPS{web},
	'heavy/auto' => $CAPS{heavy});
my @rows = split /\n/, logged('%');
is(scalar(@rows), 9, 'app: every statement of the procedure ran');
like($rows[0], qr/^call 1\|maint\/auto\|/, 'app: the CALL\'s first transaction holds maint');
is( join("\n", grep { my ($t, $h, $c) = split /\|/; !defined $by_held{$h} || $c ne $by_held{$h} } @rows),
	'', 'app: each statement ran with the caps of the permit its transaction held');
lanes_paired($node, 'after the procedures', 'web', 'heavy', 'maint', 'batch');
$node->safe_psql('postgres', 'TRUNCATE log');

# --- 5. EXPLAIN ANALYZE moves the permit for the statement it runs -----------
is(sql($s, 'BEGIN; SELECT held()'), 'web/auto', 'a transaction in web');
$out = sql($s, q{EXPLAIN (COSTS OFF)
	INSERT INTO log (tag, held, caps) SELECT 'explain', held(), caps() WHERE costly() = 1});
like($out, qr/One-Time Filter: \(costly\(\) = 1\)/, 'EXPLAIN of a costly INSERT');
is(sql($s, 'SELECT held()'), 'web/auto', 'EXPLAIN without ANALYZE moves nothing');
($out, $err) = sql2(
	$s, q{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
	INSERT INTO log (tag, held, caps) SELECT 'explain analyze', held(), caps() WHERE costly() = 1;
	SELECT held(), caps(); COMMIT;});
is($err, '', 'EXPLAIN ANALYZE of a costly INSERT');
like($out, qr/heavy\/auto from web\|\Q$CAPS{heavy}\E$/, 'it moved the transaction\'s permit to heavy');
is(logged('explain%'), "explain analyze|heavy/auto from web|$CAPS{heavy}",
	'the statement it ran ran in heavy, with its caps');
$node->safe_psql('postgres', 'TRUNCATE log');

# --- 6. the extended protocol -----------------------------------------------
# pgbench: -M extended sends each statement unnamed (Parse, Bind, Execute),
# -M prepared prepares it once per connection and runs its cached plan.
# :flag is a parameter ($1) in both.
my $script = $node->basedir . '/lane.sql';
PostgreSQL::Test::Utils::append_to_file($script,
	"INSERT INTO log (tag, held, caps) SELECT :tag, held(), caps() || ' ' || CASE WHEN :flag = 1 THEN costly() ELSE 0 END;\n"
);
my %expect;
for my $mode ('extended', 'prepared')
{
	for my $pcm ('force_custom_plan', 'force_generic_plan')
	{
		for my $flag (0, 1)
		{
			my $tag = "$mode $pcm $flag";
			local $ENV{PGOPTIONS} = "-c plan_cache_mode=$pcm";
			my ($stdout, $stderr);
			my $ok = IPC::Run::run(
				[
					'pgbench', '-n', '-t', '3', '-M', $mode,
					'-D', "flag=$flag", '-D', "tag=$tag",
					'-f', $script, '-U', 'app',
					'-h', $node->host, '-p', $node->port, 'postgres'
				],
				'>', \$stdout, '2>', \$stderr);
			ok($ok, "pgbench -M $mode, $pcm, flag $flag") or diag $stderr;
			my $lane = ($flag == 1 || $pcm eq 'force_generic_plan') ? 'heavy' : 'web';
			$expect{$tag} = join("\n", ("$tag|$lane/auto|$CAPS{$lane} $flag") x 3);
		}
	}
}
for my $tag (sort keys %expect)
{
	is(logged($tag), $expect{$tag},
		"pgbench $tag: each execution in its lane (heavy for a costly plan: custom with flag 1, generic always), capped");
}
$node->safe_psql('postgres', 'TRUNCATE log');

# plan_cache_mode auto: at the 6th execution of a named statement the server
# plans the generic plan only to learn its cost; it is costlier than the
# custom plans, so it is dropped and a custom plan runs (generic_plans stays
# 0).  The lane is the plan's that runs: all eight cheap executions in web.
# (Fails with bulkhead 1.3 as of this writing: the generic plan, planned at
# Bind through the planner hook, is matched and sends the 6th to heavy.)
{
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[
			'pgbench', '-n', '-t', '8', '-M', 'prepared',
			'-D', 'flag=0', '-D', 'tag=auto',
			'-f', $script, '-U', 'app',
			'-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \$stdout, '2>', \$stderr);
	ok($ok, 'pgbench -M prepared, plan_cache_mode auto, 8 executions') or diag $stderr;
	is( $node->safe_psql('postgres',
			"SELECT string_agg(split_part(held, '/', 1), ',' ORDER BY id) FROM log WHERE tag = 'auto'"),
		'web,web,web,web,web,web,web,web',
		'pgbench -M prepared, auto: every execution runs a cheap custom plan, in web, even the 6th (whose generic plan is only costed)');
}
$node->safe_psql('postgres', 'TRUNCATE log');

SKIP:
{
	skip "psql's \\bind is PostgreSQL 16's", 2 if $node->pg_version < 16;
	is( sql(
			$s, q{BEGIN; SELECT held();
			SELECT held(), caps(), CASE WHEN $1 THEN costly() ELSE 0 END \bind false \g
			SELECT held(), caps(), CASE WHEN $1 THEN costly() ELSE 0 END \bind true \g
			SELECT held(), caps(); COMMIT;}),
		"web/auto\nweb/auto|$CAPS{web}|0\nheavy/auto from web|$CAPS{heavy}|1\n"
		  . "heavy/auto from web|$CAPS{heavy}",
		'\\bind: the unnamed statement stays in web when cheap, moves to heavy when costly');
	is(sql($s, 'SELECT held(), caps()'), "web/auto|$CAPS{web}", '\\bind: and the next transaction is in web');
}
SKIP:
{
	skip "psql's \\parse is PostgreSQL 18's", 2 if $node->pg_version < 18;
	is( sql(
			$s, q{SET plan_cache_mode = force_generic_plan;
			SELECT held(), caps(), CASE WHEN $1::bool THEN costly() ELSE 0 END \parse n1
			\bind_named n1 false \g
			\bind_named n1 false \g}),
		"heavy/auto|$CAPS{heavy}|0\nheavy/auto|$CAPS{heavy}|0",
		'\\parse and \\bind_named: the generic plan of a named statement is costly: heavy, capped');
	is( sql($s, q{BEGIN; SELECT held(); \bind_named n1 false \g
			SELECT held(); COMMIT; RESET plan_cache_mode;}),
		"web/auto\nheavy/auto from web|$CAPS{heavy}|0\nheavy/auto from web",
		'\\bind_named: its cached plan moves a transaction\'s permit');
}

# --- 7. planned again under the lane's caps -------------------------------------
# The plan that ran, as auto_explain logged it after $offset: the lines of
# the entry whose query text has $tag
sub plan_logged
{
	my ($offset, $tag) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my @entries = split /\n(?=\d{4}-\d\d-\d\d )/, $log;
	my @plans = grep { /plan:\n\s*Query Text: .*\Q$tag\E/ } @entries;
	return @plans == 1 ? $plans[0] : "(" . scalar(@plans) . " plans logged for $tag)";
}

my $ex = session($node, 'postgres', 'explained');
my $offset = -s $node->logfile;
is(sql($ex, 'SELECT count(*) /* replan cheap */ FROM par WHERE id > 0'), '20000',
	'auto_explain: a cheap scan of par');
is(sql($ex, 'SELECT count(*) /* replan costly */ FROM par WHERE slowish(id)'), '20000',
	'auto_explain: a costly scan of par');
is( sql($ex, 'SELECT count(*) FROM par WHERE slowish(id) /* replan bind */ AND $1 \\bind true \\g'),
	'20000', 'auto_explain: a costly scan of par through the extended protocol')
  if $node->pg_version >= 16;
my $script2 = $node->basedir . '/replan.sql';
PostgreSQL::Test::Utils::append_to_file($script2,
	"SELECT count(*) FROM par WHERE slowish(id) /* replan pgbench */ AND :flag = 1;\n");
ok( IPC::Run::run(
		[
			'pgbench', '-n', '-t', '1', '-M', 'extended', '-D', 'flag=1',
			'-f', $script2, '-U', 'explained',
			'-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \my $pgb_out, '2>', \my $pgb_err),
	'pgbench -M extended: a costly scan of par');
ok( poll_until(
		$node, q{SELECT count(*) = 0 FROM pg_stat_activity WHERE usename = 'explained' AND state <> 'idle'}),
	'the statements ended');
like(plan_logged($offset, 'replan cheap'), qr/Workers Planned: 2/,
	'the cheap scan, in web, has a Gather (the parallel costs are 0)');
my $plan = plan_logged($offset, 'replan costly');
like($plan, qr/Seq Scan on par/, 'the costly scan\'s plan is logged');
unlike($plan, qr/Gather|Parallel/,
	'it was planned again under heavy\'s caps (max_parallel_workers_per_gather=0): no Gather');
SKIP:
{
	skip "psql's \\bind is PostgreSQL 16's", 2 if $node->pg_version < 16;
	$plan = plan_logged($offset, 'replan bind');
	like($plan, qr/Seq Scan on par/, '\\bind: the costly scan\'s plan is logged');
	unlike($plan, qr/Gather|Parallel/, '\\bind: planned again under heavy\'s caps: no Gather');
}
$plan = plan_logged($offset, 'replan pgbench');
like($plan, qr/Seq Scan on par/, 'pgbench -M extended: the costly scan\'s plan is logged');
unlike($plan, qr/Gather|Parallel/, 'pgbench -M extended: planned again under heavy\'s caps: no Gather');
close_session($ex);

lanes_paired($node, 'at the end', 'web', 'heavy', 'maint', 'batch');
close_session($_) for ($s, $batcher);
$node->stop;
done_testing();
