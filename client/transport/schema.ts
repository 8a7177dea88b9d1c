// The messages of proto/logd/v1/logd.proto as a table: [name, field number,
// type, repeated, in a oneof]. The client encodes and decodes with it
// (codec.ts) instead of parsing the .proto with protobufjs at start-up, which
// costs a fresh process tens of milliseconds. test/client-codec.test.ts holds
// this table against the .proto itself, so the two cannot drift apart.
export type Scalar = 'string' | 'bytes' | 'bool' | 'double' | 'int32' | 'uint32' | 'uint64';
export type Field = readonly [name: string, no: number, type: Scalar | string, repeated: 0 | 1, oneof: 0 | 1];

export const MESSAGES: Record<string, readonly Field[]> = {
  RankInfo: [['rank', 1, 'int32', 0, 0], ['localRank', 2, 'int32', 0, 0], ['worldSize', 3, 'int32', 0, 0], ['nodeRank', 4, 'int32', 0, 0], ['localWorldSize', 5, 'int32', 0, 0]],
  ClientInfo: [['pid', 1, 'int32', 0, 0], ['host', 2, 'string', 0, 0], ['rank', 3, 'RankInfo', 0, 0], ['clientVersion', 4, 'string', 0, 0]],
  HelloRequest: [['protocolVersion', 1, 'uint32', 0, 0], ['client', 2, 'ClientInfo', 0, 0]],
  HelloResponse: [['protocolVersion', 1, 'uint32', 0, 0], ['daemonVersion', 2, 'string', 0, 0], ['daemonPid', 3, 'int32', 0, 0], ['maxMessageBytes', 4, 'uint32', 0, 0]],
  CreateRunRequest: [['client', 1, 'ClientInfo', 0, 0], ['project', 2, 'string', 0, 0], ['name', 3, 'string', 0, 0], ['group', 4, 'string', 0, 0], ['jobType', 5, 'string', 0, 0], ['configJson', 6, 'string', 0, 0], ['tags', 7, 'string', 1, 0], ['id', 8, 'string', 0, 0], ['mode', 9, 'string', 0, 0], ['notes', 10, 'string', 0, 0], ['sampleIntervalMs', 11, 'uint32', 0, 0], ['createKey', 12, 'string', 0, 0], ['resume', 13, 'string', 0, 0], ['resumeFrom', 14, 'StepRef', 0, 0], ['forkFrom', 15, 'StepRef', 0, 0]],
  StepRef: [['runId', 1, 'string', 0, 0], ['step', 2, 'uint64', 0, 0]],
  AttachRunRequest: [['client', 1, 'ClientInfo', 0, 0], ['runId', 2, 'string', 0, 0], ['runToken', 3, 'string', 0, 0], ['writerId', 4, 'string', 0, 0]],
  RunInfo: [['id', 1, 'string', 0, 0], ['project', 2, 'string', 0, 0], ['name', 3, 'string', 0, 0], ['group', 4, 'string', 0, 0], ['jobType', 5, 'string', 0, 0], ['tags', 6, 'string', 1, 0], ['state', 7, 'string', 0, 0], ['stateReason', 8, 'string', 0, 0], ['createdAt', 9, 'double', 0, 0], ['finishedAt', 10, 'double', 0, 0], ['exitCode', 11, 'int32', 0, 0], ['configJson', 12, 'string', 0, 0], ['summaryJson', 13, 'string', 0, 0], ['metadataJson', 14, 'string', 0, 0], ['historyRows', 15, 'uint64', 0, 0], ['writers', 16, 'uint32', 0, 0], ['runToken', 17, 'string', 0, 0], ['mode', 18, 'string', 0, 0], ['notes', 19, 'string', 0, 0], ['ownerWriterId', 20, 'string', 0, 0], ['spoolDir', 21, 'string', 0, 0]],
  WriteRequest: [['open', 1, 'OpenWriter', 0, 1], ['batch', 2, 'RecordBatch', 0, 1]],
  OpenWriter: [['runId', 1, 'string', 0, 0], ['runToken', 2, 'string', 0, 0], ['writerId', 3, 'string', 0, 0], ['client', 4, 'ClientInfo', 0, 0], ['keys', 5, 'string', 1, 0]],
  RecordBatch: [['seq', 1, 'uint64', 0, 0], ['newKeys', 2, 'string', 1, 0], ['newKeysFirst', 11, 'uint32', 0, 0], ['rows', 3, 'uint32', 0, 0], ['steps', 4, 'bytes', 0, 0], ['times', 5, 'bytes', 0, 0], ['counts', 6, 'bytes', 0, 0], ['keyIds', 7, 'bytes', 0, 0], ['values', 8, 'bytes', 0, 0], ['summaryJson', 9, 'string', 1, 0], ['configJson', 10, 'string', 1, 0], ['droppedRows', 12, 'uint64', 0, 0], ['stepsGiven', 13, 'bool', 0, 0], ['consoleJson', 14, 'string', 1, 0], ['media', 15, 'Media', 1, 0]],
  Media: [['key', 1, 'string', 0, 0], ['step', 2, 'double', 0, 0], ['time', 3, 'double', 0, 0], ['kind', 4, 'string', 0, 0], ['counts', 5, 'bytes', 0, 0], ['edges', 6, 'bytes', 0, 0], ['nonfinite', 7, 'uint64', 0, 0], ['data', 8, 'bytes', 0, 0], ['format', 9, 'string', 0, 0], ['width', 10, 'uint32', 0, 0], ['height', 11, 'uint32', 0, 0], ['caption', 12, 'string', 0, 0], ['text', 13, 'string', 0, 0]],
  WriteResponse: [['opened', 1, 'Opened', 0, 1], ['ack', 2, 'Ack', 0, 1], ['control', 3, 'Control', 0, 1]],
  Opened: [['writerId', 1, 'string', 0, 0], ['lastSeq', 2, 'uint64', 0, 0], ['runState', 3, 'string', 0, 0]],
  Ack: [['seq', 1, 'uint64', 0, 0]],
  Control: [['kind', 1, 'string', 0, 0], ['seq', 2, 'uint64', 0, 0], ['message', 3, 'string', 0, 0]],
  FinishRunRequest: [['runId', 1, 'string', 0, 0], ['runToken', 2, 'string', 0, 0], ['writerId', 3, 'string', 0, 0], ['exitCode', 4, 'int32', 0, 0], ['timeoutMs', 5, 'uint32', 0, 0], ['lastSeq', 6, 'uint64', 0, 0], ['exceptionType', 7, 'string', 0, 0], ['exceptionMessage', 8, 'string', 0, 0], ['endedAt', 9, 'double', 0, 0]],
  FinishRunResponse: [['run', 1, 'RunInfo', 0, 0], ['message', 2, 'string', 0, 0], ['timedOut', 3, 'bool', 0, 0]],
  ListRunsRequest: [['project', 1, 'string', 0, 0], ['group', 2, 'string', 0, 0], ['state', 3, 'string', 0, 0], ['limit', 4, 'uint32', 0, 0], ['tag', 5, 'string', 0, 0], ['text', 6, 'string', 0, 0], ['offset', 7, 'uint32', 0, 0]],
  ListRunsResponse: [['runs', 1, 'RunInfo', 1, 0], ['total', 2, 'uint32', 0, 0], ['nextOffset', 3, 'uint32', 0, 0]],
  GetRunRequest: [['runId', 1, 'string', 0, 0]],
  ReadHistoryRequest: [['runId', 1, 'string', 0, 0], ['keys', 2, 'string', 1, 0], ['maxRowsPerChunk', 3, 'uint32', 0, 0], ['tailRows', 4, 'uint32', 0, 0], ['system', 5, 'bool', 0, 0], ['points', 6, 'uint32', 0, 0], ['allAttempts', 7, 'bool', 0, 0]],
  HistoryChunk: [['keys', 1, 'string', 1, 0], ['rows', 2, 'uint32', 0, 0], ['steps', 3, 'bytes', 0, 0], ['times', 4, 'bytes', 0, 0], ['counts', 5, 'bytes', 0, 0], ['keyIds', 6, 'bytes', 0, 0], ['values', 7, 'bytes', 0, 0], ['writer', 8, 'uint32', 0, 0], ['mins', 9, 'bytes', 0, 0], ['maxs', 10, 'bytes', 0, 0], ['storedPoints', 11, 'uint64', 0, 0], ['attempt', 12, 'uint32', 0, 0], ['superseded', 13, 'bool', 0, 0]],
  SummaryChunk: [['summaryJson', 1, 'string', 0, 0], ['statsJson', 2, 'string', 0, 0]],
  StatusRequest: [],
  StatusResponse: [['pid', 1, 'int32', 0, 0], ['version', 2, 'string', 0, 0], ['addresses', 3, 'string', 1, 0], ['dataDir', 4, 'string', 0, 0], ['startedAt', 5, 'double', 0, 0], ['sidecar', 6, 'bool', 0, 0], ['openRuns', 7, 'RunInfo', 1, 0], ['clients', 8, 'ClientInfo', 1, 0], ['recordsStored', 9, 'uint64', 0, 0], ['storageProblem', 10, 'string', 0, 0], ['storeProblems', 11, 'string', 1, 0]],
  ShutdownRequest: [],
  ShutdownResponse: [['runsKilled', 1, 'uint32', 0, 0]],
  ReportExitRequest: [['pid', 1, 'int32', 0, 0], ['exitCode', 2, 'int32', 0, 0], ['signal', 3, 'string', 0, 0], ['endedAt', 4, 'double', 0, 0]],
  ReportExitResponse: [['runs', 1, 'uint32', 0, 0]],
  AlertRequest: [['runId', 1, 'string', 0, 0], ['runToken', 2, 'string', 0, 0], ['title', 3, 'string', 0, 0], ['text', 4, 'string', 0, 0], ['level', 5, 'string', 0, 0], ['alertId', 6, 'string', 0, 0]],
  AlertResponse: [['queued', 1, 'bool', 0, 0], ['message', 2, 'string', 0, 0]],
  ReadConsoleRequest: [['runId', 1, 'string', 0, 0], ['afterOffset', 2, 'uint64', 0, 0], ['limit', 3, 'uint32', 0, 0]],
  ReadMediaRequest: [['runId', 1, 'string', 0, 0], ['afterOffset', 2, 'uint64', 0, 0], ['limit', 3, 'uint32', 0, 0], ['kind', 4, 'string', 0, 0], ['key', 5, 'string', 0, 0]],
  ReadMediaResponse: [['entriesJson', 1, 'string', 1, 0], ['nextOffset', 2, 'uint64', 0, 0]],
  ReadImageRequest: [['runId', 1, 'string', 0, 0], ['sha256', 2, 'string', 0, 0]],
  ReadImageResponse: [['data', 1, 'bytes', 0, 0], ['format', 2, 'string', 0, 0]],
  ReadConsoleResponse: [['entriesJson', 1, 'string', 1, 0], ['nextOffset', 2, 'uint64', 0, 0]],
};

/** The service's methods: the client's method name → [path, request, response, server streams]. */
export const METHODS: Record<string, readonly [path: string, request: string, response: string, clientStream: boolean, serverStream: boolean]> = {
  hello: ['/logd.v1.Logd/Hello', 'HelloRequest', 'HelloResponse', false, false],
  createRun: ['/logd.v1.Logd/CreateRun', 'CreateRunRequest', 'RunInfo', false, false],
  attachRun: ['/logd.v1.Logd/AttachRun', 'AttachRunRequest', 'RunInfo', false, false],
  write: ['/logd.v1.Logd/Write', 'WriteRequest', 'WriteResponse', true, true],
  finishRun: ['/logd.v1.Logd/FinishRun', 'FinishRunRequest', 'FinishRunResponse', false, false],
  listRuns: ['/logd.v1.Logd/ListRuns', 'ListRunsRequest', 'ListRunsResponse', false, false],
  getRun: ['/logd.v1.Logd/GetRun', 'GetRunRequest', 'RunInfo', false, false],
  readHistory: ['/logd.v1.Logd/ReadHistory', 'ReadHistoryRequest', 'HistoryChunk', false, true],
  readSummary: ['/logd.v1.Logd/ReadSummary', 'GetRunRequest', 'SummaryChunk', false, true],
  readConsole: ['/logd.v1.Logd/ReadConsole', 'ReadConsoleRequest', 'ReadConsoleResponse', false, false],
  readMedia: ['/logd.v1.Logd/ReadMedia', 'ReadMediaRequest', 'ReadMediaResponse', false, false],
  readImage: ['/logd.v1.Logd/ReadImage', 'ReadImageRequest', 'ReadImageResponse', false, false],
  status: ['/logd.v1.Logd/Status', 'StatusRequest', 'StatusResponse', false, false],
  shutdown: ['/logd.v1.Logd/Shutdown', 'ShutdownRequest', 'ShutdownResponse', false, false],
  reportExit: ['/logd.v1.Logd/ReportExit', 'ReportExitRequest', 'ReportExitResponse', false, false],
  alert: ['/logd.v1.Logd/Alert', 'AlertRequest', 'AlertResponse', false, false],
};
