// The public conformance cases through journal.plan(scenario): the same plan as the CLI's
// `stepjournal plan --scenario`, built in the same target directory.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { openJournal, planScenario } from '../index.js';
import { casesDir, runCli, scratch } from './helpers.mjs';

const cases = readdirSync(casesDir).filter((f) => f.endsWith('.json')).sort();

test('there are the 30 public cases', () => {
  assert.equal(cases.length, 30);
});

test('journal.plan gives each case the CLI plan, and the case expects it', async () => {
  const journal = await openJournal(`file:${join(scratch(), 'j')}`);
  for (const name of cases) {
    const path = join(casesDir, name);
    const text = readFileSync(path, 'utf8');
    const scenario = JSON.parse(text);
    const fromNode = journal.plan(scenario);
    const cli = runCli('plan', '--scenario', path);
    assert.equal(cli.status, 0, `${name}: ${cli.stderr}`);
    assert.deepEqual(fromNode, JSON.parse(cli.stdout), name);
    assert.deepEqual(planScenario(text), fromNode, `${name}: from the text`);
    const expect = scenario.expect;
    assert.deepEqual(fromNode.error?.kind ?? null, expect.error ?? null, `${name}: error`);
    for (const [call, members] of Object.entries(expect.calls ?? {})) {
      const planned = fromNode.calls.find((c) => c.call === call);
      assert.ok(planned, `${name}: call ${call} planned`);
      for (const [key, value] of Object.entries(members)) {
        assert.deepEqual(planned[key], value, `${name}: ${call}.${key}`);
      }
    }
    if (expect.appends) {
      assert.deepEqual(fromNode.appends.map((a) => a.type), expect.appends, `${name}: appends`);
    }
  }
});
