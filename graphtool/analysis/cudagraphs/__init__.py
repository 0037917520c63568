"""Would CUDA graphs apply: the verdict, region by region (:mod:`.verdict`), every reason torch gives to skip,
split or disable them (:mod:`.catalogue`), and the verdict of each graph under DDP (:mod:`.ddp`) and FSDP2
(:mod:`.fsdp2`); what each recording holds in cudagraph trees' memory pool (:mod:`.pool`)."""
