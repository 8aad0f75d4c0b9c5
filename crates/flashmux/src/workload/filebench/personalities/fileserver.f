# fileserver: a file server's mix of whole-file work on a large set of medium files.
#
# Each of 50 threads loops over: create a new file and write it whole; open a file and append
# to it (a random amount up to the mean append size); open a file and read it whole; delete a
# file; stat a file. All files come from one fileset of 10,000 files, 20 per directory on
# average, sizes gamma-distributed (shape 1.5, the fileset default) around a mean of 128 KiB,
# 80% of them created before the run. Whole-file reads and writes move up to 1 MiB per call.
#
# Parameters: Filebench's workloads/fileserver.f (its 1.4.9 defaults; 1.5 states the same size
# distribution as cvar-gamma with mean 131072 and gamma 1.5), run for 60 s.

set $dir=/tmp
set $nfiles=10000
set $meandirwidth=20
set $meanfilesize=128k
set $nthreads=50
set $iosize=1m
set $meanappendsize=16k
set $runtime=60

define fileset name=bigfileset,path=$dir,size=$meanfilesize,entries=$nfiles,
    dirwidth=$meandirwidth,prealloc=80

define process name=filereader,instances=1
{
  thread name=filereaderthread,memsize=10m,instances=$nthreads
  {
    # a new file, written whole
    flowop createfile name=createfile1,filesetname=bigfileset,fd=1
    flowop writewholefile name=wrtfile1,srcfd=1,fd=1,iosize=$iosize
    flowop closefile name=closefile1,fd=1
    # an append to an existing file
    flowop openfile name=openfile1,filesetname=bigfileset,fd=1
    flowop appendfilerand name=appendfilerand1,iosize=$meanappendsize,fd=1
    flowop closefile name=closefile2,fd=1
    # a whole-file read
    flowop openfile name=openfile2,filesetname=bigfileset,fd=1
    flowop readwholefile name=readfile1,fd=1,iosize=$iosize
    flowop closefile name=closefile3,fd=1
    # metadata: a delete and a stat
    flowop deletefile name=deletefile1,filesetname=bigfileset
    flowop statfile name=statfile1,filesetname=bigfileset
  }
}

echo "fileserver personality loaded"
run $runtime
