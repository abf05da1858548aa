/**
 * The gRPC form of the Open Inference Protocol (Triton's `inference.GRPCInferenceService`) for
 * Node: `import { startGrpcServer } from '@cohort/gateway/grpc'`. Kept out of the main entry so
 * the Hono app stays free of Node-only modules.
 * @module
 */
export {
  PROTO_DIR,
  grpcServerChannelOptions,
  startGrpcServer,
  type GrpcConnectionLimits,
  type GrpcGatewayOptions,
  type GrpcListenOptions,
  type GrpcServerHandle,
  type GrpcServerOptions,
} from './server.ts'
export { grpcCode } from './status.ts'
