// stepjournal for Node.js: sessions of an agent runtime kept in stepjournal, recovered by the
// seeds' rules after a crash. See README.md beside this file.
export { StepjournalError } from './lib/errors.js';
export { defineTool, defineClientTool } from './lib/tools.js';
export { openJournal, planScenario, Journal, Run, Step } from './lib/journal.js';
