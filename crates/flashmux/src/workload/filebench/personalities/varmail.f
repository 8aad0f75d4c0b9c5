# varmail: a mail server storing one message per file (as /var/mail spools do), synchronously.
#
# Each of 16 threads loops over: delete a message; deliver a new one (create, append, fsync);
# read a message whole and mark it (append, fsync); read another message whole. The fileset is
# 1,000 files in one flat directory (mean width 1,000,000), sizes gamma-distributed (shape 1.5)
# around a mean of 16 KiB, 80% created before the run. Appends are random sizes up to 16 KiB;
# whole-file reads move up to 1 MiB per call.
#
# Parameters: Filebench's workloads/varmail.f (1.4.9 defaults; 1.5's cvar-gamma with mean 16384
# and gamma 1.5 is the same distribution), run for 60 s.

set $dir=/tmp
set $nfiles=1000
set $meandirwidth=1000000
set $meanfilesize=16k
set $nthreads=16
set $iosize=1m
set $meanappendsize=16k

define fileset name=bigfileset,path=$dir,size=$meanfilesize,entries=$nfiles,
    dirwidth=$meandirwidth,prealloc=80

define process name=filereader,instances=1
{
  thread name=filereaderthread,memsize=10m,instances=$nthreads
  {
    flowop deletefile name=deletefile1,filesetname=bigfileset
    # deliver
    flowop createfile name=createfile2,filesetname=bigfileset,fd=1
    flowop appendfilerand name=appendfilerand2,iosize=$meanappendsize,fd=1
    flowop fsync name=fsyncfile2,fd=1
    flowop closefile name=closefile2,fd=1
    # read and mark
    flowop openfile name=openfile3,filesetname=bigfileset,fd=1
    flowop readwholefile name=readfile3,fd=1,iosize=$iosize
    flowop appendfilerand name=appendfilerand3,iosize=$meanappendsize,fd=1
    flowop fsync name=fsyncfile3,fd=1
    flowop closefile name=closefile3,fd=1
    # read
    flowop openfile name=openfile4,filesetname=bigfileset,fd=1
    flowop readwholefile name=readfile4,fd=1,iosize=$iosize
    flowop closefile name=closefile4,fd=1
  }
}

echo "varmail personality loaded"
run 60
