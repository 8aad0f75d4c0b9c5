//! The importer on hand-written MQSim files: what each parameter becomes, the warnings of the
//! approximations, the errors of the refusals with their lines, and generated scenarios that load.
