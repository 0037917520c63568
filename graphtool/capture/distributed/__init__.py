"""A distributed launch, built in one CPU process: the step under DDP (:mod:`.ddp`) and under FSDP2's
``fully_shard`` (:mod:`.fsdp2`) in a fake process group, and each rank's model and inputs (:mod:`.ranks`)."""
